"""Writes for field tablets: records submitted once, whatever the network does.

The tablet keeps every action in an outbox until the server confirms it and resends it as
often as it must. The rules that make that safe:

* ``(organization, uuid)`` is unique in the database. The first arrival of a UUID is stored
  together with the server's answer (``result``); a later arrival with the same content gets
  that answer again (``created`` is False) and changes nothing.
* The content of a record is the SHA-256 of the canonical JSON of kind, task and payload. A
  later arrival of a UUID with other content raises :class:`RecordConflict`: it is refused,
  never merged, and the tablet shows it to the person.
* Two arrivals at the same moment race on the unique constraint; the loser's insert fails,
  it re-reads the winner's row and answers as a replay.
* A record made against a task the manager has changed since the tablet saw it (version),
  cancelled, or given to another team is still stored (and a capture still creates its
  episode): captured data is never lost. It is marked ``stale`` with the reason, shown on the
  progress page and on the tablet, and never applied over the manager's decision: status
  moves from the field (start, blocked, finish) apply only from the statuses they expect.
* A field member records only into tasks of a team they belong to (managers into any task
  of their organization). A task given to another team after the tablet synced it still
  counts as theirs: the sync payload hands each task a signed ``seen`` token naming the team
  it was with, the tablet sends it back with every record, and a valid token for one of the
  member's teams keeps the record (stale, ``reassigned``). Without one, the record is refused
  with :class:`FieldRecordForbidden`; a ``task_version_seen`` alone proves nothing, since the
  tablet writes it.
* A NUL character (U+0000) anywhere in a record's text is refused for that record alone
  (:class:`FieldRecordInvalid` naming the field): PostgreSQL cannot store it.
* Every write takes its locks in one fixed order before touching a row: a transaction-level
  advisory lock per record UUID in ascending key order, then the rows of the tasks its status
  moves change, in ascending id order (:meth:`BatchMemo.for_batch`). Batches carrying the
  same UUIDs in any order, and single records beside them, therefore wait for each other
  instead of deadlocking; the one that waited finds the other's records stored and answers
  them as replays.
"""

from __future__ import annotations

import hashlib
import json
import uuid as uuid_module
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.core import signing
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, connection, transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.middleware import first_nul
from accounts.models import Role, membership_of
from accounts.services import audit_record
from campaigns.models import CaptureTarget, CollectionTask, FieldRecord, FieldTeam, ProtocolStep
from labeling.models import Episode
from sites.models import FailureMode

BLOCK_REASONS: dict[str, str] = {
    "site_closed": "Site closed",
    "robot_fault": "Robot fault",
    "condition_not_stageable": "Condition cannot be staged",
    "other": "Other",
}
NOTE_MAX = 5000
CAPTION_MAX = 300
PHOTO_MAX_BYTES = 15 * 1024 * 1024
# pg_advisory_xact_lock(namespace, key) per record UUID; labeling uses 7401 for label jobs.
ADVISORY_NAMESPACE = 7402
TASK_SEEN_SALT = "campaigns.field.task-seen"
PHOTO_TYPES = {
    "image/jpeg": "jpg",
    "image/png": "png",
    "image/webp": "webp",
    "image/heic": "heic",
    "image/heif": "heif",
    "image/gif": "gif",
}

# Status moves a field record may make, and the statuses each may start from. Anything else
# (a cancelled task, a task not yet published) is left as the manager set it.
FIELD_STATUS_MOVES: dict[str, tuple[frozenset[str], str]] = {
    FieldRecord.Kind.START: (
        frozenset({CollectionTask.Status.PUBLISHED}),
        CollectionTask.Status.IN_PROGRESS,
    ),
    FieldRecord.Kind.BLOCKED: (
        frozenset({CollectionTask.Status.PUBLISHED, CollectionTask.Status.IN_PROGRESS}),
        CollectionTask.Status.BLOCKED,
    ),
    FieldRecord.Kind.UNBLOCKED: (
        frozenset({CollectionTask.Status.BLOCKED}),
        CollectionTask.Status.IN_PROGRESS,
    ),
    FieldRecord.Kind.FINISH: (
        frozenset({CollectionTask.Status.PUBLISHED, CollectionTask.Status.IN_PROGRESS}),
        CollectionTask.Status.DONE,
    ),
}


class FieldRecordInvalid(Exception):
    """The record cannot be stored as sent (unknown kind, malformed payload); resending won't help.

    ``field`` names the offending field when there is one (``payload.text``).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class FieldTaskNotFound(Exception):
    """The record names a task the sender's organization does not have."""


class FieldRecordForbidden(Exception):
    """A field member recorded into a task that is not with a team of theirs; resending won't help."""


class RecordConflict(Exception):
    """The UUID is already stored with other content; the new content is refused."""

    def __init__(self, record: FieldRecord, submitted_sha256: str) -> None:
        super().__init__(
            f"Record {record.uuid} was already received on "
            f"{record.received_at:%Y-%m-%d %H:%M:%S} UTC with different content; "
            "this version was not stored."
        )
        self.record = record
        self.submitted_sha256 = submitted_sha256


@dataclass
class BatchMemo:
    """What the records of one batch from one sender share, looked up once per batch.

    ``existing`` holds the stored records among the batch's UUIDs (looked up in one query
    before the batch); tasks, team membership and targets are read once each; ``captured``
    carries each target's running count from record to record. A manager's change committed
    while a batch is being stored counts from the next batch on, as if it had arrived just
    after this one; the unique constraint still decides every race on a UUID.
    """

    existing: dict[uuid_module.UUID, FieldRecord] | None = None
    tasks: dict[int, CollectionTask | None] = field(default_factory=dict)
    members: dict[int, bool] = field(default_factory=dict)
    targets: dict[tuple[int, int], CaptureTarget | None] = field(default_factory=dict)
    captured: dict[tuple[int, int], dict[str, int]] = field(default_factory=dict)

    @classmethod
    def for_batch(cls, *, organization_id: int, records: list[Any]) -> BatchMemo:
        """Lock what these raw records will write, then read what is already stored.

        Call inside the batch's transaction: the locks last until it ends. Takes an advisory
        lock per UUID in ascending key order, then the rows of the tasks the batch's status
        moves update (FOR NO KEY UPDATE, ascending id; inserts that only reference a task do
        not wait for it). Every writer of field records takes them in this order, so none
        waits for another in a cycle. Malformed entries are skipped here and refused later.
        """
        if not transaction.get_connection().in_atomic_block:
            raise RuntimeError("Open the batch's transaction first: its locks last until it ends.")
        uuids: set[uuid_module.UUID] = set()
        moved_tasks: set[int] = set()
        for item in records:
            if not isinstance(item, dict):
                continue
            try:
                uuids.add(uuid_module.UUID(str(item.get("uuid"))))
            except ValueError:
                continue
            kind = item.get("kind")
            if isinstance(kind, str) and kind in FIELD_STATUS_MOVES:
                try:
                    task_id = _int_or_none(item.get("task"), "task")
                except FieldRecordInvalid:
                    continue
                if task_id is not None:
                    moved_tasks.add(task_id)
        keys = sorted({_uuid_lock_key(organization_id=organization_id, uuid=u) for u in uuids})
        if keys:
            with connection.cursor() as cursor:
                # unnest yields the keys in array order, so they are locked in that order.
                cursor.execute(
                    "SELECT count(pg_advisory_xact_lock(%s, k)) FROM unnest(%s::int[]) AS k",
                    [ADVISORY_NAMESPACE, keys],
                )
        memo = cls()
        if moved_tasks:
            locked = (
                _tasks_of(organization_id)
                .filter(pk__in=moved_tasks)
                .order_by("pk")
                .select_for_update(of=("self",), no_key=True)
            )
            found = {task.pk: task for task in locked}
            memo.tasks = {task_id: found.get(task_id) for task_id in sorted(moved_tasks)}
        # Read after the locks: a batch that waited sees what the other one committed.
        stored = FieldRecord.objects.filter(organization_id=organization_id, uuid__in=uuids)
        memo.existing = {r.uuid: r for r in stored}
        return memo


def _uuid_lock_key(*, organization_id: int, uuid: uuid_module.UUID) -> int:
    digest = hashlib.blake2b(f"{organization_id}:{uuid}".encode(), digest_size=4).digest()
    # A collision only makes two records wait for each other; it never lets two race.
    return int.from_bytes(digest, "big", signed=True)


def _tasks_of(organization_id: int) -> Any:
    return CollectionTask.objects.filter(
        round__campaign__organization_id=organization_id
    ).select_related("round__campaign", "round__dataset", "team", "site")


def task_seen_token(*, task_id: int, team_id: int | None) -> str:
    """Return the signed proof, sent to tablets with the task, that it was with this team.

    Empty for a task without a team. See the module docstring for what it is for.
    """
    if team_id is None:
        return ""
    return signing.Signer(salt=TASK_SEEN_SALT).sign(f"{task_id}:{team_id}")


def _seen_team(*, token: Any, task_id: int) -> int | None:
    if not token or not isinstance(token, str):
        return None
    try:
        value = signing.Signer(salt=TASK_SEEN_SALT).unsign(token)
    except signing.BadSignature:
        return None
    seen_task, _, team = value.partition(":")
    if seen_task != str(task_id) or not team.isdigit():
        return None
    return int(team)


@dataclass(frozen=True)
class CleanRecord:
    """A record's content after validation: what is hashed and stored."""

    kind: str
    task_id: int
    payload: dict[str, Any]

    @property
    def sha256(self) -> str:
        return content_sha256(kind=self.kind, task_id=self.task_id, payload=self.payload)


def content_sha256(*, kind: str, task_id: int, payload: dict[str, Any]) -> str:
    """Return the SHA-256 of the canonical JSON of kind, task and payload (the record's content)."""
    canonical = json.dumps(
        {"kind": kind, "task": task_id, "payload": payload},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise FieldRecordInvalid(f"{name} must be an id.")
    try:
        number = int(value)
    except ValueError:
        raise FieldRecordInvalid(f"{name} must be an id.") from None
    if number <= 0:
        raise FieldRecordInvalid(f"{name} must be a positive id.")
    return number


def _text(value: Any, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldRecordInvalid(f"{name} must be text.")
    text = value.strip()
    if len(text) > limit:
        raise FieldRecordInvalid(f"{name} is longer than {limit} characters.")
    return text


def field_record_clean(*, kind: str, task_id: Any, payload: Any) -> CleanRecord:
    """Validate a record's shape (no database access) and return its canonical content.

    Raises FieldRecordInvalid naming what is wrong (a NUL character anywhere in the kind or
    payload, keys included, among it). Unknown payload keys are dropped, so the stored
    content is exactly what the server understood.
    """
    for name, value in (("kind", kind), ("payload", payload)):
        where = first_nul(value, name)
        if where is not None:
            raise FieldRecordInvalid(
                f"{where} contains a NUL character (U+0000), which cannot be stored; "
                "this record was not stored. Remove it and record again.",
                field=where,
            )
    if kind not in FieldRecord.Kind.values:
        raise FieldRecordInvalid(
            f"Unknown record kind {kind!r} (one of {', '.join(FieldRecord.Kind.values)})."
        )
    task = _int_or_none(task_id, "task")
    if task is None:
        raise FieldRecordInvalid("A record needs the id of its task.")
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise FieldRecordInvalid("payload must be a JSON object.")
    clean: dict[str, Any]
    if kind == FieldRecord.Kind.STEP_DONE:
        step = _int_or_none(payload.get("step"), "step")
        if step is None:
            raise FieldRecordInvalid("A step_done record needs the step id.")
        clean = {"step": step, "title": _text(payload.get("title"), "title", 200)}
    elif kind == FieldRecord.Kind.CAPTURE:
        calibration = bool(payload.get("calibration", False))
        outcome = payload.get("outcome") or (
            Episode.Outcome.UNKNOWN if calibration else Episode.Outcome.SUCCESS
        )
        if outcome not in Episode.Outcome.values:
            raise FieldRecordInvalid(f"Unknown outcome {outcome!r} (success, failure or unknown).")
        failure_mode = _int_or_none(payload.get("failure_mode"), "failure_mode")
        if failure_mode is not None and outcome != Episode.Outcome.FAILURE:
            raise FieldRecordInvalid("Only a failed episode has a failure mode.")
        clean = {
            "target": _int_or_none(payload.get("target"), "target"),
            "outcome": outcome,
            "failure_mode": failure_mode,
            "calibration": calibration,
        }
        if payload.get("take_started_at") is not None:
            # When the team pressed "Start take" (tablet clock); the capture tap ends it.
            # Only present when sent, so records made before takes keep their content hash.
            clean["take_started_at"] = _take_start(payload["take_started_at"])
    elif kind == FieldRecord.Kind.NOTE:
        text = _text(payload.get("text"), "Note", NOTE_MAX)
        if not text:
            raise FieldRecordInvalid("A note needs some text.")
        clean = {"text": text, "step": _int_or_none(payload.get("step"), "step")}
    elif kind == FieldRecord.Kind.PHOTO:
        digest = payload.get("sha256")
        if not isinstance(digest, str) or len(digest) != 64:
            raise FieldRecordInvalid("A photo record is sent with its image file.")
        clean = {
            "sha256": digest,
            "size": int(payload.get("size") or 0),
            "content_type": str(payload.get("content_type") or ""),
            "caption": _text(payload.get("caption"), "caption", CAPTION_MAX),
        }
    elif kind == FieldRecord.Kind.BLOCKED:
        reason = payload.get("reason")
        if reason not in BLOCK_REASONS:
            raise FieldRecordInvalid(
                f"Unknown blocking reason {reason!r} (one of {', '.join(BLOCK_REASONS)})."
            )
        clean = {"reason": reason, "detail": _text(payload.get("detail"), "detail", 300)}
    else:  # start, finish, unblocked carry nothing but their time
        clean = {}
    return CleanRecord(kind=kind, task_id=task, payload=clean)


def _take_start(value: Any) -> str:
    if isinstance(value, str) and len(value) <= 40:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return moment.astimezone(UTC).isoformat()
    raise FieldRecordInvalid(
        "take_started_at: expected the time the take started, e.g. 2026-12-01T09:30:00.000Z",
        field="take_started_at",
    )


def _client_time(value: Any) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise FieldRecordInvalid("client_created_at must be an ISO 8601 date and time.")
        moment = parsed
    else:
        raise FieldRecordInvalid("client_created_at must be an ISO 8601 date and time.")
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_fixed_timezone(0))
    return moment


def _replay(record: FieldRecord, sha256: str) -> tuple[FieldRecord, bool]:
    if record.payload_sha256 != sha256:
        raise RecordConflict(record, sha256)
    return record, False


def field_record_submit(
    *,
    user: Any,
    uuid: uuid_module.UUID | str,
    kind: str,
    task_id: Any,
    payload: Any,
    client_created_at: Any,
    task_version_seen: Any,
    task_seen: str = "",
    photo: UploadedFile | None = None,
    memo: BatchMemo | None = None,
) -> tuple[FieldRecord, bool]:
    """Store one tablet record exactly once and return it with whether this call created it.

    A replay with the same content returns the stored record (and its original ``result``);
    raises RecordConflict for the same UUID with other content, FieldRecordInvalid for a
    malformed record, FieldTaskNotFound for a task outside the sender's organization and
    FieldRecordForbidden for a field member's record into a task not with a team of theirs
    (``task_seen`` is the token the sync payload gave with the task). Without ``memo`` it
    takes its own locks (a batch of one); with one, the batch's transaction holds them.
    See the module docstring for staleness and locking.
    """
    membership = membership_of(user)
    if membership is None:
        raise FieldRecordInvalid("Only members of an organization can submit field records.")
    try:
        record_uuid = uuid_module.UUID(str(uuid))
    except ValueError:
        raise FieldRecordInvalid("uuid must be a UUID.") from None
    try:
        version_seen = int(task_version_seen)
    except (TypeError, ValueError):
        raise FieldRecordInvalid(
            "task_version_seen must be the task version the tablet had."
        ) from None
    if version_seen < 0:
        raise FieldRecordInvalid("task_version_seen must not be negative.")
    raw_payload = dict(payload or {}) if isinstance(payload, dict) else payload
    if kind == FieldRecord.Kind.PHOTO:
        raw_payload = {**(raw_payload or {}), **_photo_facts(photo)}
    clean = field_record_clean(kind=kind, task_id=task_id, payload=raw_payload)
    created_at = _client_time(client_created_at)
    sha256 = clean.sha256
    org_id = membership.organization_id

    # Without a batch, one record is a batch of one: the same locks, in the same order, held
    # by its own transaction.
    with transaction.atomic() if memo is None else nullcontext():
        if memo is None:
            memo = BatchMemo.for_batch(
                organization_id=org_id,
                records=[{"uuid": record_uuid, "kind": clean.kind, "task": clean.task_id}],
            )
        return _store(
            user=user,
            role=membership.role,
            org_id=org_id,
            record_uuid=record_uuid,
            clean=clean,
            sha256=sha256,
            created_at=created_at,
            version_seen=version_seen,
            task_seen=task_seen,
            photo=photo,
            memo=memo,
        )


def _store(
    *,
    user: Any,
    role: str,
    org_id: int,
    record_uuid: uuid_module.UUID,
    clean: CleanRecord,
    sha256: str,
    created_at: datetime,
    version_seen: int,
    task_seen: str,
    photo: UploadedFile | None,
    memo: BatchMemo,
) -> tuple[FieldRecord, bool]:
    if memo.existing is not None:
        existing = memo.existing.get(record_uuid)
    else:
        existing = FieldRecord.objects.filter(organization_id=org_id, uuid=record_uuid).first()
    if existing is not None:
        return _replay(existing, sha256)

    if clean.task_id in memo.tasks:
        task = memo.tasks[clean.task_id]
    else:
        task = _tasks_of(org_id).filter(pk=clean.task_id).first()
        memo.tasks[clean.task_id] = task
    if task is None:
        raise FieldTaskNotFound(f"Task {clean.task_id} does not exist in your organization.")
    if role == Role.FIELD and not _may_record(task=task, user=user, task_seen=task_seen, memo=memo):
        team = f"team {task.team.name}" if task.team else "no team"
        raise FieldRecordForbidden(
            f"Task {task.pk} ({task.site.name}) is with {team}, not with a team you belong "
            "to: only its team or a manager can record into it. This record was not stored."
        )

    # A savepoint per record: in a batch, a record that fails rolls back alone.
    with transaction.atomic():
        try:
            with transaction.atomic():
                record = FieldRecord.objects.create(
                    organization_id=org_id,
                    uuid=record_uuid,
                    task=task,
                    author=user,
                    kind=clean.kind,
                    payload=clean.payload,
                    payload_sha256=sha256,
                    client_created_at=created_at,
                    task_version_seen=version_seen,
                )
        except IntegrityError:
            # Another request with this UUID committed first: answer as its replay. Every
            # path here holds the UUID's lock, so only a writer outside this module gets here.
            winner = FieldRecord.objects.get(organization_id=org_id, uuid=record_uuid)
            return _replay(winner, sha256)
        _apply(record=record, task=task, user=user, role=role, photo=photo, memo=memo)
    if memo.existing is not None:
        memo.existing[record_uuid] = record
    return record, True


def _may_record(*, task: CollectionTask, user: Any, task_seen: str, memo: BatchMemo) -> bool:
    """Whether a field member may record into the task: it is, or was when their tablet
    synced it (a valid ``seen`` token), with a team of theirs."""
    if task.team_id and _is_member(task.team_id, user, memo):
        return True
    seen = _seen_team(token=task_seen, task_id=task.pk)
    return seen is not None and _is_member(seen, user, memo)


def _photo_facts(photo: UploadedFile | None) -> dict[str, Any]:
    if photo is None:
        raise FieldRecordInvalid("A photo record is sent with its image file.")
    if photo.size is not None and photo.size > PHOTO_MAX_BYTES:
        raise FieldRecordInvalid(f"The photo is larger than {PHOTO_MAX_BYTES // (1024 * 1024)} MB.")
    content_type = (photo.content_type or "").split(";")[0].strip().lower()
    if content_type not in PHOTO_TYPES:
        raise FieldRecordInvalid(f"A photo must be an image (got {content_type or 'no type'}).")
    digest = hashlib.sha256()
    for chunk in photo.chunks():
        digest.update(chunk)
    photo.seek(0)
    return {"sha256": digest.hexdigest(), "size": photo.size or 0, "content_type": content_type}


def _staleness(
    *, record: FieldRecord, task: CollectionTask, user: Any, role: str, memo: BatchMemo | None
) -> str:
    if task.status == CollectionTask.Status.CANCELLED:
        return FieldRecord.StaleReason.CANCELLED
    if role == Role.FIELD and not (task.team_id and _is_member(task.team_id, user, memo)):
        return FieldRecord.StaleReason.REASSIGNED
    if task.version > record.task_version_seen:
        return FieldRecord.StaleReason.CHANGED
    return FieldRecord.StaleReason.NONE


def _is_member(team_id: int, user: Any, memo: BatchMemo | None) -> bool:
    if memo is not None and team_id in memo.members:
        return memo.members[team_id]
    member = FieldTeam.members.through.objects.filter(
        fieldteam_id=team_id, user_id=user.pk
    ).exists()
    if memo is not None:
        memo.members[team_id] = member
    return member


def _apply(
    *,
    record: FieldRecord,
    task: CollectionTask,
    user: Any,
    role: str,
    photo: Any,
    memo: BatchMemo | None = None,
) -> None:
    """Carry out what a newly stored record means and keep the answer in ``record.result``."""
    reason = _staleness(record=record, task=task, user=user, role=role, memo=memo)
    payload = record.payload
    result: dict[str, Any] = {}
    if record.kind == FieldRecord.Kind.CAPTURE:
        target = _task_target(task=task, target_id=payload.get("target"), memo=memo)
        if payload.get("target") and target is None:
            # Kept against the round's target when the manager took it off the task.
            target = CaptureTarget.objects.filter(
                round_id=task.round_id, pk=payload["target"]
            ).first()
            reason = reason or FieldRecord.StaleReason.TARGET_REMOVED
        episode = _episode_create(record=record, task=task, target=target)
        record.target = target
        record.episode = episode
        result = {"episode": episode.pk, "target": target.pk if target else None}
        if target is not None and not payload.get("calibration"):
            # This record is not saved yet: the others' total plus this one.
            key = (task.pk, target.pk)
            if memo is not None and key in memo.captured:
                captured = dict(memo.captured[key])
            else:
                captured = _captured(task_id=task.pk, target_id=target.pk)
            if payload["outcome"] in captured:
                captured[payload["outcome"]] += episode.episode_count
            if memo is not None:
                memo.captured[key] = dict(captured)
            result["captured"] = captured
    elif record.kind == FieldRecord.Kind.STEP_DONE:
        step = ProtocolStep.objects.filter(task=task, pk=payload["step"]).first()
        record.step = step
        result = {"step": step.pk if step else None}
    elif record.kind == FieldRecord.Kind.NOTE:
        if payload.get("step"):
            record.step = ProtocolStep.objects.filter(task=task, pk=payload["step"]).first()
    elif record.kind == FieldRecord.Kind.PHOTO:
        ext = PHOTO_TYPES[payload["content_type"]]
        name = f"photo.{ext}"
        storage = record.photo.storage
        path = record.photo.field.generate_filename(record, name)
        if storage.exists(path):
            # Left by an attempt whose transaction rolled back; this UUID is ours now.
            storage.delete(path)
        record.photo.save(name, photo, save=False)
        result = {"photo": True, "size": payload["size"]}
    if record.kind in FIELD_STATUS_MOVES:
        result.update(_status_move(record=record, task=task, user=user, stale_reason=reason))
    record.stale = bool(reason)
    record.stale_reason = reason
    result["stale"] = reason or None
    result["task_version"] = task.version
    record.result = result
    record.save(
        update_fields=["target", "step", "episode", "photo", "stale", "stale_reason", "result"]
    )


def _task_target(
    *, task: CollectionTask, target_id: int | None, memo: BatchMemo | None = None
) -> CaptureTarget | None:
    if not target_id:
        return None
    if memo is not None and (task.pk, target_id) in memo.targets:
        return memo.targets[(task.pk, target_id)]
    target = CaptureTarget.objects.filter(task_targets__task=task, pk=target_id).first()
    if memo is not None:
        memo.targets[(task.pk, target_id)] = target
    return target


def _episode_create(
    *, record: FieldRecord, task: CollectionTask, target: CaptureTarget | None
) -> Episode:
    round = task.round
    if round.dataset_id is None:
        raise FieldRecordInvalid(
            f"Round {round.number} has no capture dataset; ask the manager to recreate the round."
        )
    payload = record.payload
    failure_mode_id = None
    if payload.get("failure_mode"):
        failure_mode_id = (
            FailureMode.objects.filter(
                organization_id=record.organization_id, pk=payload["failure_mode"]
            )
            .values_list("pk", flat=True)
            .first()
        )
    return Episode.objects.create(
        organization_id=record.organization_id,
        dataset_id=round.dataset_id,
        key=str(record.uuid),
        embodiment_id=task.embodiment_id,
        site_id=task.site_id,
        task_id=round.campaign.task_id,
        condition_set_id=target.condition_set_id if target else None,
        outcome=payload["outcome"],
        failure_mode_id=failure_mode_id,
        provenance=Episode.Provenance.CAPTURED,
        validated=False,  # capture validation sets it once the recording passes
        recorded_at=record.client_created_at,
        extra={
            "field_record": str(record.uuid),
            "collection_task": task.pk,
            "target": target.pk if target else None,
            "calibration": bool(payload.get("calibration")),
            "round": round.number,
            "team": task.team.slug if task.team is not None else None,
            **(
                {
                    "take": {
                        "started_at": payload["take_started_at"],
                        "ended_at": record.client_created_at.isoformat(),
                    }
                }
                if payload.get("take_started_at")
                else {}
            ),
        },
    )


def _captured(*, task_id: int, target_id: int) -> dict[str, int]:
    totals = FieldRecord.objects.filter(
        task_id=task_id, target_id=target_id, kind=FieldRecord.Kind.CAPTURE, episode__isnull=False
    ).aggregate(
        success=Sum("episode__episode_count", filter=Q(episode__outcome=Episode.Outcome.SUCCESS)),
        failure=Sum("episode__episode_count", filter=Q(episode__outcome=Episode.Outcome.FAILURE)),
    )
    return {"success": totals["success"] or 0, "failure": totals["failure"] or 0}


def _status_move(
    *, record: FieldRecord, task: CollectionTask, user: Any, stale_reason: str
) -> dict[str, Any]:
    """Move the task's status as the record asks, unless the manager's state says otherwise."""
    allowed_from, to_status = FIELD_STATUS_MOVES[record.kind]
    if stale_reason in (FieldRecord.StaleReason.CANCELLED, FieldRecord.StaleReason.REASSIGNED):
        return {"applied": False, "task_status": task.status}
    fields: dict[str, Any] = {"status": to_status}
    if record.kind == FieldRecord.Kind.BLOCKED:
        label = BLOCK_REASONS[record.payload["reason"]]
        detail = record.payload.get("detail")
        fields["blocked_reason"] = (f"{label}: {detail}" if detail else label)[:300]
    elif record.kind == FieldRecord.Kind.UNBLOCKED:
        fields["blocked_reason"] = ""
    # Conditional on the status: a manager's cancel or re-plan in between is never overwritten.
    moved = CollectionTask.objects.filter(pk=task.pk, status__in=allowed_from).update(**fields)
    current = CollectionTask.objects.filter(pk=task.pk).values_list("status", flat=True).first()
    if moved:
        audit_record(
            organization=record.organization_id,
            actor=user,
            verb=f"task.field_{record.kind}",
            obj=task,
            changes={"status": [task.status, to_status], "record": str(record.uuid)},
        )
    if current is not None:
        # Later records of the same batch see the status as it now is.
        task.status = current
        if "blocked_reason" in fields and moved:
            task.blocked_reason = fields["blocked_reason"]
    return {"applied": bool(moved), "task_status": current}
