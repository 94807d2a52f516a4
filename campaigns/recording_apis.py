"""Recording uploads: a resumable, checksummed upload API for field tablets and the fleet.

Protocol:
    POST /api/collection-tasks/{id}/recordings/   {filename, size, sha256, kind, episode?}
    POST /api/failure-records/{id}/recordings/    {filename, size, sha256, kind}
        → 201 {upload, offset}   start (or resume: the same content's unfinished upload)
        → 200 {recording}        this content is already stored: nothing to send
    PUT  /api/recording-uploads/{id}/   raw bytes, header Content-Range: bytes START-END/TOTAL
        → 200 {offset}           stored; send the next chunk from ``offset``
        → 201 {recording}        last chunk, checksum verified, validation queued
        → 409 {offset}           the chunk did not start where the server's copy ends
        → 413 {limit}            the chunk is over the limit (labeling.recording_services.MAX_CHUNK_BYTES)
    GET  /api/recording-uploads/{id}/   → {offset} (where to resume)

A task's recording is its captures' (one take, or cut into takes); an intervention's becomes
the episode of its deployment's production dataset (:mod:`labeling.production`), made when the
recording is stored (``labeling.recording_services.upload_stored``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import IO, Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import ScopedViewSetMixin
from accounts.models import Role, membership_of
from campaigns.models import CollectionTask, TaskRecording
from campaigns.takes import recording_takes_request
from labeling import recording_services as recordings
from labeling.models import Episode, Recording, RecordingUpload
from labeling.recording_services import (
    UploadChunkMismatch,
    UploadChunkTooLarge,
    UploadError,
    UploadOffsetMismatch,
    upload_append,
    upload_start,
)
from sites.models import FailureRecord

CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


class OctetStreamParser(BaseParser):
    """The body as a stream, read by the service a block at a time (never whole)."""

    media_type = "application/octet-stream"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return stream


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
        data = payload.validated_data
        context = {
            "task_id": task.pk,
            "kind": data["kind"],
            "embodiment_id": task.embodiment_id,
            "calibration": data["kind"] == TaskRecording.Kind.CALIBRATION,
            "dataset_id": task.round.dataset_id,
            "episode_key": data.get("episode") or None,
        }

        def stored(recording: Recording) -> None:
            TaskRecording.objects.get_or_create(
                task=task, recording=recording, defaults={"kind": data["kind"]}
            )

        return _start_upload(request, data=data, context=context, stored=stored)


def _start_upload(
    request: Request,
    *,
    data: dict[str, Any],
    context: dict[str, Any],
    stored: Callable[[Recording], None],
) -> Response:
    """Start (or resume) an upload for what ``context`` names; when the content is stored
    already, hand it to its owner with ``stored`` (idempotent) and answer 200 with it."""
    membership = membership_of(request.user)
    assert membership is not None
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
        stored(result)
        result.refresh_from_db()
        return Response({"recording": RecordingSerializer(result).data}, status=status.HTTP_200_OK)
    return Response(UploadSerializer(result).data, status=status.HTTP_201_CREATED)


class FailureRecordRecordings(ScopedViewSetMixin, viewsets.GenericViewSet):
    """The recording of an intervention: upload it as field recordings are; once stored it is
    an episode of the deployment's production dataset, validated like a field capture."""

    base_queryset = FailureRecord.objects.select_related("deployment")
    serializer_class = RecordingSerializer
    # Whoever uploads field recordings; customers see records but do not add data.
    read_roles = frozenset({Role.MANAGER, Role.FIELD})
    write_roles = frozenset({Role.MANAGER, Role.FIELD})

    def get_queryset(self) -> Any:
        # The record's own organization only (the recording is stored in it): customers
        # read their deployments' records but never add data to them.
        membership = membership_of(self.request.user)
        qs = super().get_queryset()
        return qs.filter(organization_id=membership.organization_id) if membership else qs.none()

    @extend_schema(responses=RecordingSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="recordings", url_name="recordings")
    def list_recordings(self, request: Request, pk: str | None = None) -> Response:
        record = self.get_object()
        episodes = Episode.objects.filter(failure_record=record, failure_record__isnull=False)
        recordings = Recording.objects.filter(episode__in=episodes).order_by("-created_at")
        return Response(RecordingSerializer(recordings, many=True).data)

    @extend_schema(
        request=UploadStartSerializer, responses={201: UploadSerializer, 200: RecordingSerializer}
    )
    @list_recordings.mapping.post
    def start_upload(self, request: Request, pk: str | None = None) -> Response:
        record = self.get_object()
        payload = UploadStartSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        if data["kind"] != TaskRecording.Kind.EPISODE:
            return Response(
                {"detail": "kind: an intervention's recording is an episode, not a calibration"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        context = {
            "failure_record_id": record.pk,
            "kind": data["kind"],
            "embodiment_id": record.deployment.embodiment_id,
        }

        def stored(recording: Recording) -> None:
            recordings.upload_stored(recording=recording, context=context, actor=request.user)

        return _start_upload(request, data=data, context=context, stored=stored)


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
        if match is None:
            return Response(
                {"detail": "Content-Range: expected 'bytes START-END/TOTAL'"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        start, end, total = (int(g) for g in match.groups())
        declared = end - start + 1
        try:
            body_length: int | None = int(request.META["CONTENT_LENGTH"])
        except (KeyError, TypeError, ValueError):
            body_length = None
        limit = recordings.MAX_CHUNK_BYTES
        biggest = max(declared, body_length or 0)
        if biggest > limit:  # refused before a byte of the body is read
            return self._too_large(UploadChunkTooLarge(size=biggest, limit=limit))
        # Without a Content-Length the body's length is checked while it is read.
        if total != upload.size or declared < 1 or body_length not in (None, declared):
            return Response(
                {
                    "detail": f"Content-Range says bytes {start}-{end}/{total} but the upload is {upload.size:,} bytes "
                    f"and the body {body_length or 0:,} bytes"
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        body: Any = request.data  # the parser's stream; an empty dict when there is no body
        stream: IO[bytes] = body if hasattr(body, "read") else io.BytesIO(b"")
        try:
            result = upload_append(
                upload=upload, offset=start, chunk=stream, length=declared, actor=request.user
            )
        except UploadChunkTooLarge as exc:
            return self._too_large(exc)
        except UploadChunkMismatch as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except UploadOffsetMismatch as exc:
            return Response(
                {"detail": str(exc), "offset": exc.expected}, status=status.HTTP_409_CONFLICT
            )
        except UploadError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        if isinstance(result, Recording):
            task_id = (upload.context or {}).get("task_id")
            if task_id:
                _, linked = TaskRecording.objects.get_or_create(
                    task_id=task_id,
                    recording=result,
                    defaults={"kind": (upload.context or {}).get("kind", "episode")},
                )
                if linked and result.episode_id is None and not result.is_calibration:
                    # A recording of several takes: cut it at the tablet's take boundaries.
                    recording_takes_request(
                        task=CollectionTask.objects.get(pk=task_id),
                        recording=result,
                        actor=request.user,
                    )
            result.refresh_from_db()
            return Response(
                {"recording": RecordingSerializer(result).data}, status=status.HTTP_201_CREATED
            )
        return Response(UploadSerializer(result).data)

    @staticmethod
    def _too_large(exc: UploadChunkTooLarge) -> Response:
        return Response(
            {"detail": str(exc), "limit": exc.limit},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
