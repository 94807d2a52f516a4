"""Capture validation inside the app: resumable uploads, content-addressed storage, validation in Celery.

A recording is stored once per content (SHA-256) per organization: re-sending the same file
returns the stored recording. Uploads are resumable: bytes arrive in order at the offset the
server reports, and the checksum is verified before the file is kept.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Organization
from accounts.services import JobFailed, job_create, job_running
from labeling.models import Episode, Recording, RecordingUpload
from labeling.production import failure_record_recording_attach
from labeling.selectors import capture_spec_for
from sites.models import Embodiment, FailureRecord

MAX_RECORDING_BYTES = 50 * 1024**3
# One PUT of an upload: a tablet on a poor link resends whole chunks, and a worker holds no
# more than a block of one in memory (the rest is spooled to disk as it arrives).
MAX_CHUNK_BYTES = 16 * 1024**2
CHUNK_BLOCK_BYTES = 1024**2
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class UploadError(ValueError):
    """An upload request that cannot be taken (names the field and what was expected)."""


class UploadOffsetMismatch(UploadError):
    """A chunk did not start where the server's copy ends; ``expected`` is where to resume."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(
            f"chunk starts at byte {got:,} but the server has {expected:,}; resume from {expected:,}"
        )
        self.expected = expected


class UploadChunkTooLarge(UploadError):
    """A chunk over :data:`MAX_CHUNK_BYTES`; ``limit`` is the most one chunk may carry."""

    def __init__(self, *, size: int | None, limit: int) -> None:
        what = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
        super().__init__(
            f"chunk: {what}, over the limit of {limit:,} bytes ({limit / 1024**2:g} MB) per "
            f"chunk; send the file in chunks of at most {limit:,} bytes"
        )
        self.limit = limit


class UploadChunkMismatch(UploadError):
    """A chunk's body is not as long as its Content-Range says."""


def _root(kind: str) -> Path:
    path = Path(settings.MEDIA_ROOT) / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def upload_start(
    *,
    organization: Organization,
    filename: str,
    size: int,
    sha256: str,
    context: dict[str, Any],
    actor: Any = None,
) -> RecordingUpload | Recording:
    """Start (or resume) an upload; return the stored Recording when this content is already here."""
    sha = sha256.strip().lower()
    if not SHA256.match(sha):
        raise UploadError("sha256: expected the file's SHA-256 as 64 hexadecimal characters")
    if not 0 < size <= MAX_RECORDING_BYTES:
        raise UploadError(f"size: expected 1 byte to {MAX_RECORDING_BYTES:,} bytes, got {size:,}")
    name = Path(filename).name
    if not name.lower().endswith(".mcap"):
        raise UploadError(f"filename: expected an .mcap recording, got {name!r}")
    existing = Recording.objects.filter(organization=organization, sha256=sha).first()
    if existing is not None:
        return existing
    pending = (
        RecordingUpload.objects.filter(
            organization=organization, sha256=sha, size=size, recording__isnull=True
        )
        .order_by("created_at")
        .first()
    )
    if pending is not None:
        return pending
    upload = RecordingUpload.objects.create(
        organization=organization,
        filename=name,
        size=size,
        sha256=sha,
        context=context,
        created_by=actor if getattr(actor, "pk", None) else None,
        path="",
    )
    part = _root("uploads") / f"{upload.pk}.part"
    part.touch()
    RecordingUpload.objects.filter(pk=upload.pk).update(path=str(part))
    upload.path = str(part)
    return upload


def upload_append(
    *,
    upload: RecordingUpload,
    offset: int,
    chunk: bytes | IO[bytes],
    length: int | None = None,
    actor: Any = None,
) -> RecordingUpload | Recording:
    """Append a chunk at ``offset``; when the last byte arrives verify the checksum and store the recording.

    ``chunk`` is the bytes, or a stream of ``length`` bytes (a request body) that is copied to
    disk a block at a time, never read whole. Raises UploadChunkTooLarge over
    :data:`MAX_CHUNK_BYTES`, UploadChunkMismatch when the stream does not hold ``length``
    bytes, UploadOffsetMismatch when the chunk does not start where the server's copy ends,
    UploadError when it runs past the declared size or the checksum does not match (the
    partial file is then discarded so the client starts again).
    """
    if upload.recording_id:
        return upload.recording  # type: ignore[return-value]
    if isinstance(chunk, bytes):
        size = len(chunk)
    elif length is None:
        raise TypeError("upload_append: a streamed chunk needs its length")
    else:
        size = length
    if size > MAX_CHUNK_BYTES:
        raise UploadChunkTooLarge(size=size, limit=MAX_CHUNK_BYTES)
    if offset + size > upload.size:
        raise UploadError(
            f"chunk ends at byte {offset + size:,}, past the declared size {upload.size:,}"
        )
    # Refuse a chunk at the wrong place before reading its body (checked again under the lock).
    received = RecordingUpload.objects.filter(pk=upload.pk).values_list("received", flat=True)
    if received and received[0] != offset:
        raise UploadOffsetMismatch(received[0], offset)
    spool = (
        None
        if isinstance(chunk, bytes)
        else _spool(chunk, upload=upload, offset=offset, length=size)
    )
    try:
        with transaction.atomic():
            locked = RecordingUpload.objects.select_for_update().get(pk=upload.pk)
            if locked.recording_id:
                return locked.recording  # type: ignore[return-value]
            if offset != locked.received:
                raise UploadOffsetMismatch(locked.received, offset)
            with open(locked.path, "r+b") as fh:
                fh.seek(offset)
                if spool is None:
                    assert isinstance(chunk, bytes)
                    fh.write(chunk)
                else:
                    with spool.open("rb") as src:
                        shutil.copyfileobj(src, fh, CHUNK_BLOCK_BYTES)
                fh.truncate()
            RecordingUpload.objects.filter(pk=locked.pk).update(received=F("received") + size)
            locked.refresh_from_db()
    finally:
        if spool is not None:
            spool.unlink(missing_ok=True)
    if not locked.complete:
        return locked
    return _finish(locked, actor)


def _spool(stream: IO[bytes], *, upload: RecordingUpload, offset: int, length: int) -> Path:
    """Copy ``length`` bytes of ``stream`` to a scratch file, a block at a time.

    Reads at most one byte more than it may keep, so a body longer than it says (or with no
    length at all) costs a block of memory, never the whole body.
    """
    limit = MAX_CHUNK_BYTES
    most = min(length, limit) + 1
    path = _root("uploads") / f"{upload.pk}.{uuid.uuid4().hex}.chunk"
    got = 0
    try:
        with path.open("wb") as out:
            while got < most:
                block = stream.read(min(CHUNK_BLOCK_BYTES, most - got))
                if not block:
                    break
                got += len(block)
                out.write(block)
        if got > limit:
            raise UploadChunkTooLarge(size=None, limit=limit)
        if got != length:
            held = f"more than {length:,}" if got > length else f"{got:,}"
            raise UploadChunkMismatch(
                f"the body holds {held} bytes but Content-Range says bytes "
                f"{offset}-{offset + length - 1} ({length:,} bytes)"
            )
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def _finish(upload: RecordingUpload, actor: Any) -> Recording:
    digest = hashlib.sha256()
    with open(upload.path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != upload.sha256:
        RecordingUpload.objects.filter(pk=upload.pk).update(received=0)
        Path(upload.path).write_bytes(b"")
        raise UploadError(
            f"sha256: {upload.filename}, bytes 0-{upload.size - 1} (all {upload.size:,} "
            f"received) hash to {digest.hexdigest()[:12]}…, not {upload.sha256[:12]}…; the "
            "upload was reset to byte 0, send the file again from offset 0"
        )
    target = _root("recordings") / upload.sha256[:2] / f"{upload.sha256}.mcap"
    target.parent.mkdir(parents=True, exist_ok=True)
    context = upload.context or {}
    episode = None
    if context.get("episode_key") and context.get("dataset_id"):
        episode = Episode.objects.filter(
            dataset_id=context["dataset_id"], key=str(context["episode_key"])
        ).first()
    with transaction.atomic():
        try:
            with transaction.atomic():
                recording = Recording.objects.create(
                    organization_id=upload.organization_id,
                    sha256=upload.sha256,
                    size=upload.size,
                    original_name=upload.filename,
                    storage_path=str(target),
                    embodiment_id=context.get("embodiment_id"),
                    episode=episode,
                    is_calibration=bool(context.get("calibration")),
                    created_by=actor if getattr(actor, "pk", None) else None,
                )
            created = True
        except IntegrityError:
            recording = Recording.objects.get(
                organization_id=upload.organization_id, sha256=upload.sha256
            )
            created = False
        RecordingUpload.objects.filter(pk=upload.pk).update(recording=recording)
        if created:
            shutil.move(upload.path, target)
            upload_stored(recording=recording, context=context, actor=actor)
            recording_validate_request(recording=recording, actor=actor)
        else:
            Path(upload.path).unlink(missing_ok=True)
            upload_stored(recording=recording, context=context, actor=actor)
    return recording


def upload_stored(*, recording: Recording, context: dict[str, Any], actor: Any = None) -> None:
    """Hand a stored recording to what it was uploaded for (the upload's ``context``).

    Runs before its validation is queued, so the verdict lands on the episode made here. A
    collection task's recording needs nothing here (its episode is named in the context, or
    its takes are cut when the upload answers); a failure record's (``failure_record_id``)
    becomes the episode of its deployment's production dataset (:mod:`labeling.production`).
    Idempotent: also run when the same content was stored by another upload.
    """
    record_id = context.get("failure_record_id")
    if record_id:
        recording.refresh_from_db()
        record = FailureRecord.objects.filter(
            pk=record_id, organization_id=recording.organization_id
        ).first()
        if record is None:  # a retracted intervention leaves the recording stored
            return
        _, linked = failure_record_recording_attach(record=record, recording=recording, actor=actor)
        if linked and recording.status in (Recording.Status.PASSED, Recording.Status.FAILED):
            recording_verdict_apply(recording=recording)  # its content was validated before


def recording_uploads_purge(*, now: Any = None) -> int:
    """Remove uploads abandoned halfway: no byte for ``UPLOAD_RETENTION_DAYS``. Their partial
    file and their row go; a later upload of the same content starts afresh. Finished uploads
    (their recording stored) are never touched. Returns how many were removed."""
    from datetime import timedelta

    now = now or timezone.now()
    before = now - timedelta(days=settings.FIELDCRAFT["UPLOAD_RETENTION_DAYS"])
    stale = list(
        RecordingUpload.objects.filter(recording__isnull=True, updated_at__lt=before).values_list(
            "pk", "path"
        )
    )
    for _, path in stale:
        if path:
            Path(path).unlink(missing_ok=True)
    RecordingUpload.objects.filter(pk__in=[pk for pk, _ in stale]).delete()
    return len(stale)


def recording_store_file(
    *,
    organization: Organization,
    path: Path,
    episode: Episode | None = None,
    embodiment: Embodiment | None = None,
    is_calibration: bool = False,
    actor: Any = None,
) -> tuple[Recording, bool]:
    """Store a recording file already on this machine (content-addressed, as an upload is) and
    link it to ``episode``; returns (recording, created). The same content is stored once: a
    second call returns the stored recording. Validation is the caller's to request."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    existing = Recording.objects.filter(organization=organization, sha256=sha).first()
    if existing is not None:
        return existing, False
    target = _root("recordings") / sha[:2] / f"{sha}.mcap"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{sha}.{uuid.uuid4().hex[:8]}")
    shutil.copyfile(path, partial)
    partial.replace(target)
    try:
        with transaction.atomic():
            recording = Recording.objects.create(
                organization=organization,
                sha256=sha,
                size=Path(path).stat().st_size,
                original_name=Path(path).name[:300],
                storage_path=str(target),
                embodiment=embodiment,
                episode=episode,
                is_calibration=is_calibration,
                created_by=actor if getattr(actor, "pk", None) else None,
            )
    except IntegrityError:
        return Recording.objects.get(organization=organization, sha256=sha), False
    return recording, True


def recording_validate_request(*, recording: Recording, actor: Any = None) -> Any:
    """Queue capture validation of a stored recording (progress on a Job)."""
    return job_create(
        organization=recording.organization,
        kind="capture_validation",
        title=f"Validate {recording.original_name}",
        task_name="labeling.tasks.recording_validate",
        task_kwargs={"recording_id": recording.pk},
        created_by=actor,
    )


def recording_validate_run(*, job_id: str) -> None:
    """Validate the job's recording and write the verdict to it and its episode."""
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        recording = Recording.objects.select_related("embodiment", "episode").get(
            pk=ctx.job.task_kwargs["recording_id"]
        )
        ctx.progress(0, 1, f"Reading {recording.original_name}", force=True)
        recording = recording_validate(recording=recording)
        if recording.status == Recording.Status.UNREADABLE:
            raise JobFailed(recording.message, [{"message": recording.message}])


def recording_validate(*, recording: Recording) -> Recording:
    """Validate now (idempotent): store the report, set the episode's sync status and validity."""
    from labeling.capture import CaptureReadError, validate_recording

    Recording.objects.filter(pk=recording.pk).update(status=Recording.Status.VALIDATING)
    spec = capture_spec_for(embodiment=recording.embodiment) if recording.embodiment else None
    try:
        report = validate_recording(
            [Path(recording.storage_path)],
            spec,
            calibration=recording.is_calibration and spec is not None,
        )
    except CaptureReadError as exc:
        Recording.objects.filter(pk=recording.pk).update(
            status=Recording.Status.UNREADABLE,
            message=str(exc),
            validated_at=timezone.now(),
            report={"error": str(exc)},
        )
        _mark_episode(
            recording, passed=False, failed=["files_read"], sync=Episode.SyncStatus.INCOMPLETE
        )
        recording.refresh_from_db()
        return recording
    data = report.to_dict()
    failed = [c.name for c in report.failed_checks]
    status = Recording.Status.PASSED if report.passed else Recording.Status.FAILED
    Recording.objects.filter(pk=recording.pk).update(
        status=status, report=data, message=report.to_text()[:4000], validated_at=timezone.now()
    )
    _mark_episode(
        recording, passed=report.passed, failed=failed, sync=_sync_of(report.passed, failed)
    )
    recording.refresh_from_db()
    if (
        recording.episode_id is not None or recording.segments.exists()
    ) and recording.embodiment_id is not None:
        # Converted now, in the background, so the annotator can play it and exports reuse it.
        from labeling.playback import recording_convert_request

        recording_convert_request(recording=recording)
    return recording


def recording_verdict_apply(*, recording: Recording) -> None:
    """Write a validated recording's verdict to its episodes again (after takes were cut from
    it) and queue their conversion."""
    recording.refresh_from_db()
    if recording.status not in (Recording.Status.PASSED, Recording.Status.FAILED):
        return
    report = recording.report or {}
    failed = [str(c.get("name")) for c in report.get("checks", []) if not c.get("passed")]
    passed = recording.status == Recording.Status.PASSED
    _mark_episode(recording, passed=passed, failed=failed, sync=_sync_of(passed, failed))
    if recording.embodiment_id is not None:
        from labeling.playback import recording_convert_request

        recording_convert_request(recording=recording)


def _sync_of(passed: bool, failed: list[str]) -> str:
    """An episode's sync status from its recording's verdict and failed checks."""
    if passed:
        return Episode.SyncStatus.SYNCED
    if "synchronisation" in failed:
        return Episode.SyncStatus.DESYNCED
    return Episode.SyncStatus.INCOMPLETE


def _mark_episode(recording: Recording, *, passed: bool, failed: list[str], sync: str) -> None:
    """Write the verdict to the recording's episode, or to each take's episode of it."""
    ids = [recording.episode_id] if recording.episode_id is not None else []
    ids += list(recording.segments.values_list("episode_id", flat=True))
    for episode_id in ids:
        _mark_one(episode_id, recording, passed=passed, failed=failed, sync=sync)


def _mark_one(
    episode_id: int, recording: Recording, *, passed: bool, failed: list[str], sync: str
) -> None:
    episode = Episode.objects.get(pk=episode_id)
    extra = dict(episode.extra or {})
    extra["capture"] = {"passed": passed, "failed_checks": failed, "recording": recording.pk}
    # Calibration episodes are not training data: validation never makes them count.
    validated = passed and not recording.is_calibration
    Episode.objects.filter(pk=episode.pk).update(sync_status=sync, validated=validated, extra=extra)
