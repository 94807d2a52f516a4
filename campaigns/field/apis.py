"""REST API for field tablets: the sync payload, records (one or a batch) and setup photos.

``POST /api/field/records/`` takes one record or a list. Each record gets its own status:
201 stored now, 200 stored before with the same content (the original answer is returned),
409 stored before with other content (refused; both hashes and the stored record are in the
answer), 400 malformed (a NUL character in a value among it: ``field`` names where), 403 a
task that is not with the field member's team, 404 unknown task. A single record is
answered with its status; a list with 200 and the statuses inside, so one bad record never
holds up the others. For that reason these views check NUL characters per record
themselves (``nul_checked_by_view``): the middleware that refuses NUL for the rest of the
app passes their bodies through.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import ScopedViewSetMixin
from accounts.models import Role, membership_of
from accounts.pagination import LargeListPagination
from accounts.parsers import FormParser, MultiPartParser
from campaigns.field.selectors import field_sync
from campaigns.field.services import (
    BatchMemo,
    FieldRecordForbidden,
    FieldRecordInvalid,
    FieldTaskNotFound,
    RecordConflict,
    field_record_submit,
)
from campaigns.models import CollectionTask, FieldRecord

FIELD_ROLES = frozenset({Role.FIELD, Role.MANAGER})
BATCH_MAX = 200


KINDS_HELP = "One of: " + ", ".join(FieldRecord.Kind.values) + "."


def _known_kind(value: str) -> None:
    if value not in FieldRecord.Kind.values:
        raise serializers.ValidationError(f"Unknown kind {value!r}. {KINDS_HELP}")


class FieldRecordInSerializer(serializers.Serializer):
    uuid = serializers.UUIDField()
    # Plain text with a validator: an enum here would collide with other "kind" enums.
    kind = serializers.CharField(help_text=KINDS_HELP, validators=[_known_kind])
    task = serializers.IntegerField(min_value=1)
    payload = serializers.DictField(required=False, default=dict)
    client_created_at = serializers.DateTimeField()
    task_version_seen = serializers.IntegerField(min_value=0)
    task_seen = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=200,
        help_text="The task's `seen` token from the sync payload, sent back unchanged: it lets "
        "a record made before the task went to another team be kept.",
    )


class FieldPhotoInSerializer(serializers.Serializer):
    uuid = serializers.UUIDField()
    task = serializers.IntegerField(min_value=1)
    client_created_at = serializers.DateTimeField()
    task_version_seen = serializers.IntegerField(min_value=0)
    task_seen = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    caption = serializers.CharField(required=False, allow_blank=True, default="")
    file = serializers.FileField(required=False, help_text="The image (JPEG, PNG, WebP, HEIC).")


class FieldRecordSerializer(serializers.ModelSerializer):
    kind = serializers.CharField(read_only=True, help_text=KINDS_HELP)
    author = serializers.CharField(source="author.username", read_only=True, allow_null=True)
    photo_url = serializers.SerializerMethodField()

    class Meta:
        model = FieldRecord
        fields = [
            "uuid",
            "kind",
            "task",
            "target",
            "step",
            "episode",
            "author",
            "payload",
            "payload_sha256",
            "client_created_at",
            "received_at",
            "task_version_seen",
            "stale",
            "stale_reason",
            "result",
            "photo_url",
        ]
        read_only_fields = fields

    def get_photo_url(self, record: FieldRecord) -> str | None:
        if not record.photo:
            return None
        return (
            reverse("field:task-photos", kwargs={"pk": record.task_id}) + f"?record={record.uuid}"
        )


class ConflictSerializer(serializers.Serializer):
    stored_sha256 = serializers.CharField()
    submitted_sha256 = serializers.CharField()
    stored = FieldRecordSerializer()


class FieldRecordOutcomeSerializer(serializers.Serializer):
    uuid = serializers.CharField(allow_null=True)
    status = serializers.IntegerField(
        help_text="201 new, 200 replay, 409 conflict, 400 malformed, 403 not your team's task, "
        "404 unknown task."
    )
    created = serializers.BooleanField()
    detail = serializers.CharField(allow_blank=True)
    field = serializers.CharField(
        required=False, allow_null=True, help_text="The refused field, e.g. `payload.text`."
    )
    record = FieldRecordSerializer(allow_null=True)
    conflict = ConflictSerializer(allow_null=True, required=False)


class FieldRecordBatchSerializer(serializers.Serializer):
    results = FieldRecordOutcomeSerializer(many=True)


def _outcome(
    *, uuid: Any, code: int, detail: str = "", record: FieldRecord | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "uuid": str(uuid) if uuid else None,
        "status": code,
        "created": code == status.HTTP_201_CREATED,
        "detail": detail,
        "record": FieldRecordSerializer(record).data if record is not None else None,
        **extra,
    }


def submit_one(
    *, user: Any, data: Any, photo: Any = None, memo: BatchMemo | None = None
) -> dict[str, Any]:
    """Validate and store one record; return its outcome (never raises for bad input)."""
    uuid = data.get("uuid") if isinstance(data, dict) else None
    incoming = FieldRecordInSerializer(data=data)
    if not incoming.is_valid():
        return _outcome(
            uuid=uuid, code=status.HTTP_400_BAD_REQUEST, detail=_errors(incoming.errors)
        )
    values = incoming.validated_data
    try:
        record, created = field_record_submit(
            user=user,
            uuid=values["uuid"],
            kind=values["kind"],
            task_id=values["task"],
            payload=values["payload"],
            client_created_at=values["client_created_at"],
            task_version_seen=values["task_version_seen"],
            task_seen=values["task_seen"],
            photo=photo,
            memo=memo,
        )
    except RecordConflict as exc:
        return _outcome(
            uuid=values["uuid"],
            code=status.HTTP_409_CONFLICT,
            detail=str(exc),
            conflict={
                "stored_sha256": exc.record.payload_sha256,
                "submitted_sha256": exc.submitted_sha256,
                "stored": FieldRecordSerializer(exc.record).data,
            },
        )
    except FieldTaskNotFound as exc:
        return _outcome(uuid=values["uuid"], code=status.HTTP_404_NOT_FOUND, detail=str(exc))
    except FieldRecordForbidden as exc:
        return _outcome(uuid=values["uuid"], code=status.HTTP_403_FORBIDDEN, detail=str(exc))
    except FieldRecordInvalid as exc:
        return _outcome(
            uuid=values["uuid"], code=status.HTTP_400_BAD_REQUEST, detail=str(exc), field=exc.field
        )
    code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return _outcome(
        uuid=record.uuid,
        code=code,
        detail="Stored." if created else "Already stored; this is the original answer.",
        record=record,
    )


def _errors(errors: Any) -> str:
    parts = []
    for name, messages in dict(errors).items():
        text = "; ".join(str(m) for m in messages) if isinstance(messages, list) else str(messages)
        parts.append(f"{name}: {text}")
    return " ".join(parts)


class FieldRecordViewSet(ScopedViewSetMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Field records: what tablets recorded. POST one record or a list (idempotent by UUID)."""

    base_queryset = FieldRecord.objects.select_related("author").order_by("-id")
    serializer_class = FieldRecordSerializer
    pagination_class = LargeListPagination
    filterset_fields = ["task", "kind", "stale"]
    read_roles = FIELD_ROLES
    write_roles = FIELD_ROLES
    nul_checked_by_view = True  # per record, in field_record_clean

    @extend_schema(
        request=FieldRecordInSerializer(many=True),
        responses={
            200: FieldRecordBatchSerializer,
            201: FieldRecordOutcomeSerializer,
            400: OpenApiTypes.OBJECT,
            403: FieldRecordOutcomeSerializer,
            404: FieldRecordOutcomeSerializer,
            409: FieldRecordOutcomeSerializer,
        },
        description="Send one record (answered with its own status) or a list of up to "
        f"{BATCH_MAX} (answered 200 with a status per record).",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data
        if isinstance(data, list):
            if len(data) > BATCH_MAX:
                return Response(
                    {"detail": f"Send at most {BATCH_MAX} records at once."},
                    status=status.HTTP_400_BAD_REQUEST,
                )
            # One transaction for the batch, a savepoint per record: a record that fails
            # rolls back alone, and the batch costs one commit. Should the commit itself fail,
            # nothing was confirmed and the tablet resends the same UUIDs. The memo takes the
            # batch's locks first, in a fixed order (see records), so reordered batches of
            # the same UUIDs wait for each other rather than deadlock.
            membership = membership_of(request.user)
            with transaction.atomic():
                memo = (
                    BatchMemo.for_batch(organization_id=membership.organization_id, records=data)
                    if membership is not None
                    else None
                )
                results = [submit_one(user=request.user, data=item, memo=memo) for item in data]
            return Response({"results": results}, status=status.HTTP_200_OK)
        outcome = submit_one(user=request.user, data=data)
        return Response(outcome, status=outcome["status"])


class FieldPhotoViewSet(viewsets.GenericViewSet):
    """Setup photos: a multipart upload that is a field record of kind ``photo`` (idempotent)."""

    parser_classes = [MultiPartParser, FormParser]
    serializer_class = FieldPhotoInSerializer
    read_roles = FIELD_ROLES
    write_roles = FIELD_ROLES
    nul_checked_by_view = True  # per record, in field_record_clean

    def get_queryset(self) -> Any:
        return FieldRecord.objects.visible_to(self.request.user).filter(kind=FieldRecord.Kind.PHOTO)

    @extend_schema(
        request={"multipart/form-data": FieldPhotoInSerializer},
        responses={
            200: FieldRecordOutcomeSerializer,
            201: FieldRecordOutcomeSerializer,
            400: OpenApiTypes.OBJECT,
            403: FieldRecordOutcomeSerializer,
            404: FieldRecordOutcomeSerializer,
            409: FieldRecordOutcomeSerializer,
        },
    )
    def create(self, request: Request) -> Response:
        upload = request.FILES.get("file")
        form: Any = request.data
        data = {
            "uuid": form.get("uuid"),
            "kind": FieldRecord.Kind.PHOTO,
            "task": form.get("task"),
            "payload": {"caption": form.get("caption", "")},
            "client_created_at": form.get("client_created_at"),
            "task_version_seen": form.get("task_version_seen"),
            "task_seen": form.get("task_seen", ""),
        }
        outcome = submit_one(user=request.user, data=data, photo=upload)
        return Response(outcome, status=outcome["status"])


class AccessWindowOutSerializer(serializers.Serializer):
    weekday = serializers.IntegerField()
    start = serializers.CharField()
    end = serializers.CharField()


class SiteOutSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    address = serializers.CharField()
    timezone = serializers.CharField()
    access_window = serializers.CharField(help_text="The windows on the task's day.")
    access_windows = AccessWindowOutSerializer(many=True)


class CountsSerializer(serializers.Serializer):
    success = serializers.IntegerField()
    failure = serializers.IntegerField()
    unknown = serializers.IntegerField()


class SetupSerializer(serializers.Serializer):
    dimension = serializers.CharField()
    value = serializers.CharField()
    instruction = serializers.CharField(allow_blank=True)


class FieldTargetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    episodes_planned = serializers.IntegerField()
    failure_mode = serializers.CharField(allow_blank=True)
    captured = CountsSerializer()
    setup = SetupSerializer(many=True)


class FieldStepSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    order = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    instructions = serializers.CharField(allow_blank=True)
    episodes = serializers.IntegerField(allow_null=True)
    target = serializers.IntegerField(allow_null=True)
    done = serializers.BooleanField()


class CalibrationSerializer(serializers.Serializer):
    uuid = serializers.CharField()
    status = serializers.CharField(help_text="awaiting, passed or failed.")
    detail = serializers.CharField()


class NoteOutSerializer(serializers.Serializer):
    uuid = serializers.CharField()
    text = serializers.CharField()
    author = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField()


class FieldTaskSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    status = serializers.CharField(
        help_text="The task status: " + ", ".join(CollectionTask.Status.values) + "."
    )
    status_label = serializers.CharField()
    blocked_reason = serializers.CharField(allow_blank=True)
    scheduled_date = serializers.DateField(allow_null=True)
    start_at = serializers.DateTimeField(allow_null=True)
    end_at = serializers.DateTimeField(allow_null=True)
    local_window = serializers.CharField(
        allow_blank=True,
        help_text="Start–end on the site's clock with the zone's abbreviation, e.g. "
        "08:30–12:00 CET; empty while the task has no times.",
    )
    campaign = serializers.CharField()
    round = serializers.IntegerField()
    embodiment = serializers.CharField()
    team = serializers.CharField(allow_blank=True)
    site = SiteOutSerializer()
    targets = FieldTargetSerializer(many=True)
    steps = FieldStepSerializer(many=True)
    captured_untargeted = CountsSerializer(help_text="Captures recorded without a target.")
    calibration = CalibrationSerializer(many=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    notes = NoteOutSerializer(many=True)
    stale_records = serializers.IntegerField()
    seen = serializers.CharField(
        allow_blank=True,
        help_text="Send back as `task_seen` with every record for this task: proof that the "
        "task was with your team when the tablet synced it.",
    )


class FailureModePickSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    code = serializers.CharField()
    name = serializers.CharField()
    parent = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    leaf = serializers.BooleanField()


class BlockReasonSerializer(serializers.Serializer):
    code = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]


@extend_schema_serializer(many=False)
class FieldSyncSerializer(serializers.Serializer):
    server_time = serializers.DateTimeField()
    today = serializers.DateField()
    tasks = FieldTaskSerializer(many=True)
    failure_modes = FailureModePickSerializer(many=True)
    block_reasons = BlockReasonSerializer(many=True)


class FieldTaskViewSet(viewsets.GenericViewSet):
    """The signed-in member's tasks from yesterday to a week ahead, for offline work."""

    serializer_class = FieldSyncSerializer
    pagination_class = None
    read_roles = FIELD_ROLES

    def get_queryset(self) -> Any:
        return CollectionTask.objects.visible_to(self.request.user)

    @extend_schema(responses=FieldSyncSerializer)
    def list(self, request: Request) -> Response:
        membership = membership_of(request.user)
        org_id = membership.organization_id if membership else 0
        data = field_sync(user=request.user, organization_id=org_id)
        response = Response(FieldSyncSerializer(data).data)
        response["Cache-Control"] = "no-store"
        return response
