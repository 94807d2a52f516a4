"""Writes for the training-data inventory: starting, running and cancelling imports."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from accounts.models import Job, Organization
from accounts.services import (
    JobFailed,
    job_cancel,
    job_create,
    job_enqueue,
    job_running,
)
from labeling.importers.errors import ImportFailed, ImportProblem
from labeling.importers.mapping import parse_pairs
from labeling.importers.runner import ImportRequest, run_import
from labeling.importers.sources import FORMATS, detect_format
from labeling.models import InventoryImport
from labeling.selectors import COVERAGE_KEY, coverage_grouped

TASK_NAME = "labeling.tasks.inventory_import"

Pairs = Iterable[str] | Mapping[str, str] | Iterable[tuple[str, str]] | None


def _pairs(value: Pairs, *, what: str, label: str) -> list[tuple[str, str]]:
    if not value:
        return []
    if isinstance(value, Mapping):
        return [(str(k).strip(), str(v).strip()) for k, v in value.items()]
    items = list(value)
    if all(isinstance(i, list | tuple) and len(i) == 2 for i in items):
        return [(str(a).strip(), str(b).strip()) for a, b in items]  # type: ignore[misc]
    return parse_pairs([str(i) for i in items], what=what, label=label)


def inventory_import_start(
    *,
    organization: Organization,
    dataset_name: str,
    path: Path | str,
    source_name: str | None = None,
    format: str | None = None,
    mapping: Pairs = None,
    sets: Pairs = None,
    create_values: bool = False,
    embodiment: str | None = None,
    site: str | None = None,
    created_by: Any = None,
    enqueue: bool = True,
) -> InventoryImport:
    """Record an import and queue its job (dispatched once the transaction commits).

    Raises ImportFailed when the request itself is unusable: no dataset name, a missing
    path, an unknown format, or a malformed ``COLUMN=TARGET`` / ``DIMENSION=VALUE`` pair.
    Problems inside the file are found by the job.
    """
    path = Path(path)
    label = source_name or path.name or str(path)
    problems: list[ImportProblem] = []
    if not dataset_name or not dataset_name.strip():
        problems.append(ImportProblem(label, "give the dataset a name"))
    fmt = (format or "").strip().lower()
    if fmt and fmt not in FORMATS:
        problems.append(
            ImportProblem(label, f"unknown format {format!r} (one of {', '.join(FORMATS)})")
        )
    if problems:
        raise ImportFailed(problems)
    if not fmt:
        fmt = detect_format(path)
    elif not path.exists():
        raise ImportFailed.one(label, "no such file or folder")
    map_pairs = _pairs(mapping, what="mapping", label=label)
    set_pairs = _pairs(sets, what="--set", label=label)

    with transaction.atomic():
        job = job_create(
            organization=organization,
            kind="import",
            task_name=TASK_NAME,
            title=f"Import {label} into {dataset_name.strip()}",
            created_by=created_by,
            enqueue=False,
        )
        record = InventoryImport.objects.create(
            organization=organization,
            dataset_name=dataset_name.strip()[:200],
            source_path=str(path)[:1000],
            source_name=label[:300],
            format=fmt,
            options={
                "mapping": [list(p) for p in map_pairs],
                "sets": [list(p) for p in set_pairs],
                "create_values": bool(create_values),
                "embodiment": embodiment or None,
                "site": site or None,
            },
            job=job,
            created_by=created_by if getattr(created_by, "pk", None) else None,
        )
        if enqueue:
            job_enqueue(job=job)
    return record


def inventory_import_run(*, job_id: str) -> None:
    """Run a queued import (the Celery task calls this). Idempotent: a re-delivered task
    finds the job claimed or finished and does nothing; a re-run after a crash starts over
    (the upsert makes that safe).
    """
    from accounts.services import job_set_result

    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        record = InventoryImport.objects.get(job_id=job_id)
        options = record.options or {}
        request = ImportRequest(
            organization_id=record.organization_id,
            dataset_name=record.dataset_name,
            path=Path(record.source_path),
            format=record.format,
            source_name=record.source_name,
            staging_name=f"import_staging_{uuid.UUID(str(job_id)).hex}",
            mapping=[tuple(p) for p in options.get("mapping") or []],  # type: ignore[misc]
            sets=[tuple(p) for p in options.get("sets") or []],  # type: ignore[misc]
            create_values=bool(options.get("create_values")),
            embodiment=options.get("embodiment"),
            site=options.get("site"),
            import_id=record.pk,
        )
        try:
            summary = run_import(request, ctx)
        except ImportFailed as exc:
            InventoryImport.objects.filter(pk=record.pk).update(
                summary={"problems_total": exc.total}
            )
            raise JobFailed(exc.summary(), errors=[p.as_dict() for p in exc.problems]) from None
        InventoryImport.objects.filter(pk=record.pk).update(summary=summary)
        job_set_result(job=ctx.job, result={"summary": summary}, message=summary_line(summary))


def summary_line(summary: Mapping[str, Any]) -> str:
    """One sentence for the job's message: what the import wrote."""
    return (
        f"{summary.get('episodes', 0):,} episodes and {summary.get('frames', 0):,} frames in "
        f"{summary.get('rows', 0):,} rows: {summary.get('inserted', 0):,} new, "
        f"{summary.get('updated', 0):,} updated, {summary.get('unchanged', 0):,} unchanged"
        + (f", {summary['removed']:,} removed" if summary.get("removed") else "")
        + "."
    )


def inventory_import_cancel(*, inventory_import: InventoryImport) -> bool:
    """Ask a queued or running import to stop; nothing it staged is written."""
    return job_cancel(job=inventory_import.job)


def inventory_upload_discard(*, path: Path) -> None:
    """Remove an upload that did not become an import (its request was refused)."""
    import shutil

    folder = path.parent
    if Path(settings.MEDIA_ROOT, "imports") in folder.parents:
        shutil.rmtree(folder, ignore_errors=True)


def inventory_uploads_purge(*, now: Any = None) -> int:
    """Remove uploaded import files that no import needs any more; return how many folders.

    An upload lives in its own folder under MEDIA_ROOT/imports/. It is kept while its import
    (or the job whose ``path`` names it) is queued or running (a worker that dies re-runs it from the file) and for
    ``UPLOAD_RETENTION_DAYS`` after it ends; a folder no import names (its request was
    refused) goes after a day — younger ones may belong to a request being accepted now.
    Files named on the server by the command line are never touched.
    """
    import shutil

    root = Path(settings.MEDIA_ROOT) / "imports"
    if not root.is_dir():
        return 0
    now = now or timezone.now()
    keep_since = now - timedelta(days=settings.FIELDCRAFT["UPLOAD_RETENTION_DAYS"])
    named: set[str] = set()
    needed: set[str] = set()
    # Uploads are named by their import, or by the job that reads them (production events).
    named_by = list(
        InventoryImport.objects.filter(source_path__startswith=f"{root}/").values_list(
            "source_path", "job__status", "job__finished_at"
        )
    ) + list(
        Job.objects.filter(task_kwargs__path__startswith=f"{root}/").values_list(
            "task_kwargs__path", "status", "finished_at"
        )
    )
    for source, status, finished_at in named_by:
        name = Path(source).relative_to(root).parts[0]
        named.add(name)
        if status in Job.ACTIVE or finished_at is None or finished_at > keep_since:
            needed.add(name)
    removed = 0
    for folder in root.iterdir():
        if not folder.is_dir() or folder.name in needed:
            continue
        if (
            folder.name not in named
            and folder.stat().st_mtime > (now - timedelta(days=1)).timestamp()
        ):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


def inventory_upload_store(*, upload: UploadedFile) -> Path:
    """Keep an uploaded file under MEDIA_ROOT/imports/<uuid>/ and return its path."""
    folder = Path(settings.MEDIA_ROOT) / "imports" / uuid.uuid4().hex
    folder.mkdir(parents=True, exist_ok=True)
    name = get_valid_filename(Path(upload.name or "upload").name) or "upload"
    target = folder / name
    with target.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return target


@transaction.atomic
def coverage_rebuild(*, organization_id: int | None = None) -> int:
    """Recount the maintained coverage counts from the episodes; return the keys written.

    Locks the episode table against writes (SHARE) for the length of the rebuild, so no
    statement's delta falls between the delete and the recount.
    """
    grouped, params = coverage_grouped(organization_id=organization_id).query.sql_with_params()
    keys = ", ".join(COVERAGE_KEY)
    with connection.cursor() as cursor:
        cursor.execute("LOCK TABLE labeling_episode IN SHARE MODE")
        if organization_id is None:
            cursor.execute("DELETE FROM labeling_coveragecount")
        else:
            cursor.execute(
                "DELETE FROM labeling_coveragecount WHERE organization_id = %s", [organization_id]
            )
        cursor.execute(
            f"INSERT INTO labeling_coveragecount ({keys}, episodes, rows) {grouped}", params
        )
        return cursor.rowcount
