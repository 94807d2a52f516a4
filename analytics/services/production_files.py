"""Production events from files: CSV/TSV, Parquet and JSON Lines, read in batches for ingest.

A file holds the events the API takes (:mod:`analytics.services.production`), one per row or
line. Tabular files name the fields in a header: ``event_id``, ``deployment`` (or given once
for the whole file), ``kind`` (``cycle`` when blank), ``occurred_at``, ``outcome``,
``failure_mode``, ``intervened_by``, ``duration_s``, ``policy``, ``note``, ``recording``,
``op``; every other column is a condition dimension (by slug, or ``conditions.<slug>``) whose
cells are value slugs. Cells are cleaned by the inventory importer's rules
(:mod:`labeling.importers.rules`): trimmed, and blank words (``n/a``, ``-`` …) are no value;
``duration_s`` may group thousands. JSON Lines lines are the API's event objects as they are.

Rows are numbered as a person sees them (CSV: the header is row 1; Parquet: the first data
row is row 1; JSON Lines: the line number), so ingest errors name the row. Batches go to
ingest one transaction each: an import stopped by a bad row keeps the batches before it, and
running the fixed file again stores only what is new (ingest is idempotent on event ids).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from accounts.models import Job, Organization
from accounts.services import JobContext, JobFailed, job_create, job_running, job_set_result
from analytics.services.production import (
    DeploymentNotFound,
    IngestResult,
    ProductionBusy,
    ProductionConflict,
    ProductionInvalid,
    production_ingest_lines,
)
from labeling.importers.errors import ImportFailed, ImportProblem
from labeling.importers.rules import BLANKS, GROUP_SEPARATORS, TRIM
from labeling.importers.sources import detect_format, parquet_open

BATCH_EVENTS = 10_000
"""Events per ingest batch: the API's limit."""

MAX_LINE_BYTES = 1024 * 1024
"""The longest JSON Lines line (one event) read."""

FIELDS = frozenset(
    {
        "event_id",
        "deployment",
        "kind",
        "occurred_at",
        "outcome",
        "failure_mode",
        "intervened_by",
        "duration_s",
        "policy",
        "note",
        "recording",
        "op",
    }
)
_BLANKS = frozenset(BLANKS)
_GROUPED = re.compile("[" + re.escape(GROUP_SEPARATORS) + "]")


def _clean(value: Any) -> str | None:
    """Return the cell as trimmed text, or None when it means no value."""
    if value is None:
        return None
    text = str(value).strip(TRIM)
    return None if text.lower() in _BLANKS else text


def _event(
    header: list[str], cells: list[Any], *, deployment: str | None, label: str, row: int
) -> dict[str, Any]:
    """Build the API's event object from one tabular row."""
    event: dict[str, Any] = {}
    conditions: dict[str, str] = {}
    for name, cell in zip(header, cells, strict=False):
        value = _clean(cell)
        if value is None or not name:
            continue
        if name in FIELDS:
            event[name] = value
        else:
            conditions[name.removeprefix("conditions.")] = value
    if conditions:
        event["conditions"] = conditions
    if "kind" not in event and event.get("op") != "retract":
        event["kind"] = "cycle"
    if deployment is not None:
        given = event.get("deployment")
        if given is not None and given != deployment:
            raise ImportFailed.one(
                label,
                f"deployment {given!r}, but the import is for {deployment!r}",
                row=row,
                column="deployment",
            )
        event["deployment"] = deployment
    if "duration_s" in event:
        text = _GROUPED.sub("", event["duration_s"])
        try:
            event["duration_s"] = float(text)
        except ValueError:
            raise ImportFailed.one(
                label,
                f"expected a number of seconds, got {event['duration_s']!r}",
                row=row,
                column="duration_s",
            ) from None
    return event


def _header(names: list[Any], label: str) -> list[str]:
    header = [(_clean(n) or "").lower() for n in names]
    missing = [f for f in ("event_id", "occurred_at") if f not in header]
    if missing:
        raise ImportFailed.one(
            label,
            f"the header has no {' and no '.join(missing)} column; it needs event_id, "
            "occurred_at and, unless given for the whole file, deployment",
            row=1,
        )
    seen: set[str] = set()
    for name in header:
        if name and name in seen:
            raise ImportFailed.one(label, f"two columns are both named {name!r}", row=1)
        seen.add(name)
    return header


def _tabular(
    path: Path, label: str, *, delimiter: str, deployment: str | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("r", encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        try:
            header = _header(next(reader), label)
        except StopIteration:
            raise ImportFailed.one(label, "the file is empty") from None
        for cells in reader:
            row = reader.line_num
            if not any(c.strip(TRIM) for c in cells):
                continue
            if len(cells) > len(header):
                raise ImportFailed.one(
                    label, f"{len(cells)} cells but the header names {len(header)}", row=row
                )
            yield row, _event(header, cells, deployment=deployment, label=label, row=row)


def _parquet(
    path: Path, label: str, *, deployment: str | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    pf = parquet_open(path, label)
    header = _header(list(pf.schema_arrow.names), label)
    row = 0
    for batch in pf.iter_batches(batch_size=BATCH_EVENTS):
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        for cells in zip(*columns, strict=True):
            row += 1
            yield row, _event(header, list(cells), deployment=deployment, label=label, row=row)


def _jsonl(
    path: Path, label: str, *, deployment: str | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as fh:
        # A line is read up to the cap and no further: a file without line ends costs 1 MB.
        lines = iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b"")
        for lineno, raw in enumerate(lines, start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise ImportFailed.one(
                    label, "the line is longer than 1 MB, the most one event may hold", row=lineno
                )
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8-sig" if lineno == 1 else "utf-8"))
            except UnicodeDecodeError:
                raise ImportFailed.one(label, "not UTF-8 text", row=lineno) from None
            except json.JSONDecodeError as exc:
                raise ImportFailed(
                    [
                        ImportProblem(
                            file=label,
                            row=lineno,
                            line_label="line",
                            message=f"invalid JSON ({exc.msg}, column {exc.colno})",
                        )
                    ]
                ) from None
            if not isinstance(value, dict):
                raise ImportFailed(
                    [
                        ImportProblem(
                            file=label, row=lineno, line_label="line", message="expected an object"
                        )
                    ]
                )
            if deployment is not None:
                value.setdefault("deployment", deployment)
            yield lineno, value


def production_file_format(path: Path) -> str:
    """Name the file's format: ``csv``, ``tsv``, ``parquet`` or ``jsonl``.

    Raises ImportFailed for a missing file or one of none of these.
    """
    name = path.name.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        if not path.is_file():
            raise ImportFailed.one(str(path), "no such file")
        return "jsonl"
    kind = detect_format(path)
    if kind not in ("csv", "tsv", "parquet"):
        raise ImportFailed.one(
            path.name, "not a CSV, TSV, Parquet or JSON Lines file of production events"
        )
    return kind


def production_file_batches(
    path: Path, *, deployment: str | None = None, batch: int = BATCH_EVENTS
) -> Iterator[tuple[list[int], list[dict[str, Any]]]]:
    """Yield (row numbers, events) in batches of at most ``batch`` events, reading the file as
    it goes (a file of any length takes the memory of one batch).

    Raises ImportFailed naming the file, row and column of the first unreadable row.
    """
    label = path.name
    kind = production_file_format(path)
    rows: Iterator[tuple[int, dict[str, Any]]]
    if kind == "jsonl":
        rows = _jsonl(path, label, deployment=deployment)
    elif kind == "parquet":
        rows = _parquet(path, label, deployment=deployment)
    else:
        rows = _tabular(
            path, label, delimiter="\t" if kind == "tsv" else ",", deployment=deployment
        )
    numbers: list[int] = []
    events: list[dict[str, Any]] = []
    for number, event in rows:
        numbers.append(number)
        events.append(event)
        if len(events) >= batch:
            yield numbers, events
            numbers, events = [], []
    if events:
        yield numbers, events


def production_import_file(
    *,
    organization: Organization,
    path: Path,
    actor: Any,
    deployment: str | None = None,
    create_values: bool = False,
    ctx: JobContext | None = None,
    label: str | None = None,
    batch: int = BATCH_EVENTS,
) -> IngestResult:
    """Ingest a file of production events in batches of :data:`BATCH_EVENTS` (one transaction
    each, so progress shows and memory stays one batch); return the totals.

    Resumable rather than all-or-nothing: a refused batch stores nothing, the batches before
    it stay, and importing the fixed file again counts only what is new (events are known by
    their ids). Raises ImportFailed naming the file, row and column of each problem (up to
    20), with how far the import got.
    """
    name = label or path.name
    unit = "line" if production_file_format(path) == "jsonl" else "row"
    total = IngestResult()
    done = 0
    for rows, events in production_file_batches(path, deployment=deployment, batch=batch):
        lines = [(row, json.dumps(event)) for row, event in zip(rows, events, strict=True)]
        try:
            result = production_ingest_lines(
                organization=organization, lines=lines, actor=actor, create_values=create_values
            )
        except ProductionInvalid as exc:
            problems = [
                ImportProblem(
                    file=name,
                    row=e.line,
                    column=e.field or None,
                    message=e.message,
                    line_label=unit,
                )
                for e in exc.errors
            ]
            raise ImportFailed(_resumable(problems, done, rows[0]), total=len(exc.errors)) from exc
        except ProductionBusy as exc:
            raise ImportFailed(
                _resumable([ImportProblem(file=name, message=str(exc))], done, rows[0])
            ) from exc
        except ProductionConflict as exc:
            message = f"{exc} Ids: {', '.join(exc.event_ids[:10])}."
            raise ImportFailed(
                _resumable([ImportProblem(file=name, message=message)], done, rows[0])
            ) from exc
        except DeploymentNotFound as exc:
            raise ImportFailed(
                _resumable(
                    [ImportProblem(file=name, column="deployment", message=str(exc))],
                    done,
                    rows[0],
                )
            ) from exc
        done += len(events)
        total.add(result)
        if ctx is not None:
            ctx.progress(done, None, f"{done:,} events read", force=True)
    return total


def _resumable(problems: list[ImportProblem], done: int, first_row: int) -> list[ImportProblem]:
    """Say, on the first problem, that the events before the refused batch are stored."""
    if done and problems:
        first = problems[0]
        problems[0] = ImportProblem(
            file=first.file,
            row=first.row,
            column=first.column,
            line_label=first.line_label,
            message=(
                f"{first.message} (the {done:,} events before {first.line_label} "
                f"{first_row:,} are stored; import the fixed file again: stored events are "
                "recognised by their ids and not counted twice)"
            ),
        )
    return problems


IMPORT_KIND = "production_import"


def production_import_request(
    *, deployment: Any, path: Path, actor: Any, create_values: bool = False
) -> Job:
    """Queue importing an uploaded events file for ``deployment`` (a job with progress)."""
    return job_create(
        organization=deployment.organization,
        kind=IMPORT_KIND,
        title=f"Production events · {path.name}"[:200],
        task_name="analytics.tasks.production_import",
        task_kwargs={
            "deployment_id": deployment.pk,
            "path": str(path),
            "create_values": bool(create_values),
        },
        created_by=actor,
    )


def production_import_run(*, job_id: str) -> None:
    """Run a queued import; the job ends with the totals or the problems (file, row, column).

    Re-running a job (a re-delivered task) is harmless: events are known by their ids.
    """
    from sites.models import Deployment

    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        params = ctx.job.task_kwargs
        deployment = Deployment.objects.select_related("organization").get(
            pk=params["deployment_id"]
        )
        path = Path(params["path"])
        try:
            result = production_import_file(
                organization=deployment.organization,
                path=path,
                actor=ctx.job.created_by,
                deployment=deployment.slug,
                create_values=params.get("create_values", False),
                ctx=ctx,
            )
        except ImportFailed as exc:
            raise JobFailed(
                exc.summary(), [{"message": str(p), "text": str(p)} for p in exc.problems]
            ) from exc
        job_set_result(
            job=ctx.job,
            result=result.as_dict(),
            message=(
                f"{result.cycles:,} cycles and {result.interventions:,} interventions stored; "
                f"{result.duplicates:,} already received"
            ),
        )
