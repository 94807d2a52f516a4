"""Recording uploads for collection tasks: a resumable, checksummed upload API for field tablets.

Protocol:
    POST /api/collection-tasks/{id}/recordings/   {filename, size, sha256, kind, episode?}
        → 201 {upload, offset}   start (or resume: the same content's unfinished upload)
        → 200 {recording}        this content is already stored: nothing to send
    PUT  /api/recording-uploads/{id}/   raw bytes, header Content-Range: bytes START-END/TOTAL
        → 200 {offset}           stored; send the next chunk from ``offset``
        → 201 {recording}        last chunk, checksum verified, validation queued
        → 409 {offset}           the chunk did not start where the server's copy ends
    GET  /api/recording-uploads/{id}/   → {offset} (where to resume)
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import ScopedViewSetMixin
from accounts.models import Role, membership_of
from campaigns.models import CollectionTask, TaskRecording
from labeling.models import Recording, RecordingUpload
from labeling.recordings import UploadError, UploadOffsetMismatch, upload_append, upload_start

CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


class OctetStreamParser(BaseParser):
    media_type = "application/octet-stream"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return bytes(stream.read())


class RecordingSerializer(serializers.ModelSerializer):
    failed_checks = serializers.SerializerMethodField()

    class Meta:
        model = Recording
        fields = [
            "id",
            "original_name",
            "sha256",
            "size",
            "status",
            "is_calibration",
            "episode",
            "failed_checks",
            "message",
            "created_at",
            "validated_at",
        ]

    def get_failed_checks(self, obj: Recording) -> list[dict[str, Any]]:
        checks = (obj.report or {}).get("checks", [])
        return [c for c in checks if not c.get("passed")]


class UploadSerializer(serializers.ModelSerializer):
    offset = serializers.IntegerField(source="received", read_only=True)

    class Meta:
        model = RecordingUpload
        fields = ["id", "filename", "size", "sha256", "offset", "recording", "created_at"]
        read_only_fields = fields


class UploadStartSerializer(serializers.Serializer):
    filename = serializers.CharField(max_length=300)
    size = serializers.IntegerField(min_value=1)
    sha256 = serializers.CharField(min_length=64, max_length=64)
    kind = serializers.ChoiceField(
        choices=TaskRecording.Kind.choices, default=TaskRecording.Kind.EPISODE
    )
    episode = serializers.CharField(
        required=False, allow_blank=True, help_text="field record UUID of the episode"
    )


class TaskRecordingSerializer(serializers.ModelSerializer):
    recording = RecordingSerializer(read_only=True)

    class Meta:
        model = TaskRecording
        fields = ["id", "kind", "recording", "created_at"]


class CollectionTaskRecordings(ScopedViewSetMixin, viewsets.GenericViewSet):
    """Recordings of a collection task: start an upload, list what was uploaded and its validation."""

    base_queryset = CollectionTask.objects.select_related("round", "embodiment")
    serializer_class = TaskRecordingSerializer
    read_roles = frozenset({Role.MANAGER, Role.FIELD})
    write_roles = frozenset({Role.MANAGER, Role.FIELD})

    @extend_schema(responses=TaskRecordingSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="recordings", url_name="recordings")
    def list_recordings(self, request: Request, pk: str | None = None) -> Response:
        task = self.get_object()
        links = TaskRecording.objects.filter(task=task).select_related("recording")
        return Response(TaskRecordingSerializer(links, many=True).data)

    @extend_schema(
        request=UploadStartSerializer, responses={201: UploadSerializer, 200: RecordingSerializer}
    )
    @list_recordings.mapping.post
    def start_upload(self, request: Request, pk: str | None = None) -> Response:
        task = self.get_object()
        payload = UploadStartSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        membership = membership_of(request.user)
        assert membership is not None
        data = payload.validated_data
        context = {
            "task_id": task.pk,
            "kind": data["kind"],
            "embodiment_id": task.embodiment_id,
            "calibration": data["kind"] == TaskRecording.Kind.CALIBRATION,
            "dataset_id": task.round.dataset_id,
            "episode_key": data.get("episode") or None,
        }
        try:
            result = upload_start(
                organization=membership.organization,
                filename=data["filename"],
                size=data["size"],
                sha256=data["sha256"],
                context=context,
                actor=request.user,
            )
        except UploadError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        if isinstance(result, Recording):
            TaskRecording.objects.get_or_create(
                task=task, recording=result, defaults={"kind": data["kind"]}
            )
            return Response(
                {"recording": RecordingSerializer(result).data}, status=status.HTTP_200_OK
            )
        return Response(UploadSerializer(result).data, status=status.HTTP_201_CREATED)


class RecordingUploadViewSet(
    ScopedViewSetMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Chunks of a resumable recording upload (PUT raw bytes with a Content-Range header)."""

    base_queryset = RecordingUpload.objects.all()
    serializer_class = UploadSerializer
    parser_classes = [OctetStreamParser]
    read_roles = frozenset({Role.MANAGER, Role.FIELD})
    write_roles = frozenset({Role.MANAGER, Role.FIELD})

    def get_queryset(self) -> Any:
        qs = super().get_queryset()
        membership = membership_of(self.request.user)
        if membership is not None and membership.role == Role.FIELD:
            qs = qs.filter(created_by=self.request.user)
        return qs

    @extend_schema(
        request={"application/octet-stream": bytes},
        parameters=[
            OpenApiParameter(
                "Content-Range", str, OpenApiParameter.HEADER, description="bytes START-END/TOTAL"
            )
        ],
        responses={200: UploadSerializer, 201: RecordingSerializer},
    )
    def update(self, request: Request, pk: str | None = None) -> Response:
        upload = self.get_object()
        match = CONTENT_RANGE.match(request.headers.get("Content-Range", ""))
        chunk = request.data if isinstance(request.data, bytes) else b""
        if match is None:
            return Response(
                {"detail": "Content-Range: expected 'bytes START-END/TOTAL'"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        start, end, total = (int(g) for g in match.groups())
        if total != upload.size or end - start + 1 != len(chunk):
            return Response(
                {
                    "detail": f"Content-Range says bytes {start}-{end}/{total} but the upload is {upload.size:,} bytes "
                    f"and the body {len(chunk):,} bytes"
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        try:
            result = upload_append(upload=upload, offset=start, chunk=chunk, actor=request.user)
        except UploadOffsetMismatch as exc:
            return Response(
                {"detail": str(exc), "offset": exc.expected}, status=status.HTTP_409_CONFLICT
            )
        except UploadError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        if isinstance(result, Recording):
            task_id = (upload.context or {}).get("task_id")
            if task_id:
                TaskRecording.objects.get_or_create(
                    task_id=task_id,
                    recording=result,
                    defaults={"kind": (upload.context or {}).get("kind", "episode")},
                )
            result.refresh_from_db()
            return Response(
                {"recording": RecordingSerializer(result).data}, status=status.HTTP_201_CREATED
            )
        return Response(UploadSerializer(result).data)
