"""Run one inventory import end to end: read, stage, check, resolve, write, summarise.

Phases (the job's progress follows them):

1. *stage* — stream the source into the staging table (progress in rows; cancellable
   between chunks; committed as it goes, it is scratch);
2. *check* — number formats, blanks, lookups against the taxonomy, all in SQL over the
   staged rows; problems are collected and the import stops before writing anything;
3. *write* — one transaction: create what was asked for (condition values with
   ``create_values``, tasks, a LeRobot embodiment), intern condition sets, upsert episodes.
   Any failure rolls all of it back.

The staging tables are dropped in every case.
"""

from __future__ import annotations

import csv
import io
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import DataError, IntegrityError, ProgrammingError, transaction
from psycopg import errors as pg_errors

from accounts.services import JobCancelled, JobContext
from labeling.importers import direct, lerobot
from labeling.importers.errors import ImportFailed, ImportProblem
from labeling.importers.mapping import MappedColumn, Target, build_mapping, describe_mapping, norm
from labeling.importers.resolve import Combinations, Resolved, resolve_lookups
from labeling.importers.sources import (
    extract_archive,
    file_size,
    is_archive,
    iter_text_chunks,
    parquet_csv_batches,
    parquet_open,
    read_header,
)
from labeling.importers.staging import Staging, sweep_orphans
from labeling.importers.statements import TypedPlan, UpsertPlan
from labeling.importers.writes import (
    create_tasks,
    create_value,
    create_values,
    dataset_for_import,
    lerobot_embodiment,
    lock_references,
)
from labeling.models import Episode
from labeling.selectors import DatasetCounts, dataset_breakdown, staged_import_pace
from sites.models import Embodiment, Site
from sites.services import ConditionLookup, condition_sets_intern

LEROBOT_BATCH = 5000
# Generous: writing an episode (indexes, foreign keys) takes ~30 µs on a small machine.
LEASE_SECONDS_PER_ROW = 0.0002


@dataclass
class ImportRequest:
    organization_id: int
    dataset_name: str
    path: Path
    format: str
    source_name: str
    staging_name: str
    mapping: list[tuple[str, str]] = field(default_factory=list)
    sets: list[tuple[str, str]] = field(default_factory=list)
    create_values: bool = False
    embodiment: str | None = None
    site: str | None = None
    import_id: int | None = None


@dataclass
class _Source:
    """What the staging phase needs from a format."""

    header: list[str]
    chunks: Iterator[bytes]
    delimiter: str
    has_header: bool
    file_label: str
    row_offset: int
    line_label: str
    total_rows: int | None
    total_bytes: int
    columns: list[MappedColumn]
    format_version: str
    fps: float | None = None
    lerobot: lerobot.LeRobotDataset | None = None
    # Record batches of text columns for the direct load (tabular sources only).
    batches: Callable[[], Iterator[tuple[Any, int]]] | None = None


def run_import(request: ImportRequest, reporter: JobContext) -> dict[str, Any]:
    """Import one source; return the summary. Raises ImportFailed or JobCancelled."""
    started = time.monotonic()
    lookup = ConditionLookup(request.organization_id)
    options = _resolve_options(request, lookup)
    with tempfile.TemporaryDirectory(prefix="fieldcraft-import-") as tmp:
        source = _open_source(request, lookup, Path(tmp))
        sweep_orphans()
        why_not = _why_not_direct(request, source)
        if why_not is None:
            try:
                return _run_direct(request, reporter, lookup, options, source, started)
            except direct.NotDirect as exc:
                why_not = str(exc)
            source = _open_source(request, lookup, Path(tmp))
        staging = Staging(
            name=request.staging_name,
            ncols=len(source.header),
            file_label=source.file_label,
            row_offset=source.row_offset,
            line_label=source.line_label,
            columns=source.header,
        )
        try:
            summary = _run(request, reporter, lookup, options, source, staging, started)
        finally:
            staging.drop()
        summary["path"] = {"direct": False, "why": why_not}
        return summary


@dataclass
class _Options:
    set_values: dict[int, int | tuple[int, str]]  # dimension id -> value id or (dim, new label)
    embodiment: Embodiment | None
    site: Site | None


def _resolve_options(request: ImportRequest, lookup: ConditionLookup) -> _Options:
    label = request.source_name
    problems: list[ImportProblem] = []
    set_values: dict[int, int | tuple[int, str]] = {}
    for dim_text, value_text in request.sets:
        dim = lookup.dimension(dim_text)
        if dim is None:
            known = (
                ", ".join(sorted({d.slug for d in lookup.dimensions.values()})) or "none defined"
            )
            problems.append(
                ImportProblem(
                    label, f"--set {dim_text}=…: unknown condition dimension (known: {known})"
                )
            )
            continue
        value_id = lookup.value_id(dim.name, value_text)
        if value_id is not None:
            set_values[dim.pk] = value_id
        elif request.create_values:
            set_values[dim.pk] = (dim.pk, value_text.strip())
        else:
            known = ", ".join(sorted(lookup.dimension_values.get(norm(dim.name), set())))
            problems.append(
                ImportProblem(
                    label,
                    f"--set {dim_text}={value_text}: unknown {dim.name} value (known: {known}); "
                    "add it to the taxonomy or pass --create-values",
                )
            )
    embodiment = site = None
    if request.embodiment:
        embodiment = _find_by_name(
            Embodiment.objects.filter(organization_id=request.organization_id),
            request.embodiment,
            ("slug", "name", "robot_type"),
        )
        if embodiment is None:
            problems.append(
                ImportProblem(label, f"--embodiment {request.embodiment}: no such embodiment")
            )
    if request.site:
        site = _find_by_name(
            Site.objects.filter(organization_id=request.organization_id),
            request.site,
            ("slug", "name"),
        )
        if site is None:
            problems.append(ImportProblem(label, f"--site {request.site}: no such site"))
    if problems:
        raise ImportFailed(problems)
    return _Options(set_values=set_values, embodiment=embodiment, site=site)


def _find_by_name(qs: Any, text: str, fields: tuple[str, ...]) -> Any:
    wanted = norm(text)
    for obj in qs:
        if any(norm(getattr(obj, f) or "") == wanted for f in fields):
            return obj
    return None


# --- sources ----------------------------------------------------------------------------


def _open_source(request: ImportRequest, lookup: ConditionLookup, tmp: Path) -> _Source:
    label = request.source_name
    path = request.path
    if request.format == "lerobot":
        if is_archive(path):
            path = extract_archive(path, tmp / "dataset")
        return _lerobot_source(request, lookup, path)
    if not path.exists():
        raise ImportFailed.one(label, "no such file")
    if path.is_dir():
        raise ImportFailed.one(
            label, f"is a folder; a {request.format.upper()} import needs a file"
        )
    if request.format in ("csv", "tsv"):
        delimiter = "\t" if request.format == "tsv" else ","
        header = read_header(path, delimiter=delimiter, label=label)
        columns = build_mapping(
            header=header, pairs=request.mapping or None, lookup=lookup, label=label
        )
        return _Source(
            header=header,
            chunks=(c.data for c in iter_text_chunks(path, label=label)),
            batches=lambda: direct.file_batches(path, ncols=len(header), delimiter=delimiter),
            delimiter=delimiter,
            has_header=True,
            file_label=label,
            row_offset=1,
            line_label="row",
            total_rows=None,
            total_bytes=file_size(path),
            columns=_require_columns(columns, header, label),
            format_version=request.format.upper(),
        )
    if request.format == "parquet":
        pf = parquet_open(path, label)
        header = [
            " ".join(str(n).split()) or f"(unnamed column {i + 1})"
            for i, n in enumerate(pf.schema_arrow.names)
        ]
        columns = build_mapping(
            header=header, pairs=request.mapping or None, lookup=lookup, label=label
        )
        return _Source(
            header=header,
            chunks=(data for data, _rows in parquet_csv_batches(pf, label=label)),
            batches=lambda: direct.csv_batches(
                _positions(parquet_csv_batches(pf, label=label)), ncols=len(header)
            ),
            delimiter=",",
            has_header=False,
            file_label=label,
            row_offset=0,
            line_label="row",
            total_rows=pf.metadata.num_rows,
            total_bytes=file_size(path),
            columns=_require_columns(columns, header, label),
            format_version="Parquet",
        )
    raise ImportFailed.one(label, f"unknown format {request.format!r} (lerobot, csv, tsv, parquet)")


def _positions(batches: Iterator[tuple[bytes, int]]) -> Iterator[tuple[bytes, int]]:
    """(CSV bytes, rows read so far) from (CSV bytes, rows in the batch)."""
    done = 0
    for data, rows in batches:
        done += rows
        yield data, done


def _require_columns(
    columns: list[MappedColumn], header: list[str], label: str
) -> list[MappedColumn]:
    if columns:
        return columns
    shown = ", ".join(repr(h[:40]) for h in header[:30])
    raise ImportFailed.one(
        label,
        "no column is mapped to an episode field or condition; give a mapping such as "
        f"--map 'COLUMN=count' (the columns are: {shown})",
    )


LEROBOT_COLUMNS = ["key", "episode_count", "frames", "task", "storage_uri"]


def _lerobot_source(request: ImportRequest, lookup: ConditionLookup, path: Path) -> _Source:
    ds = lerobot.load(path)
    extras = [e for e in ds.extra_fields if e not in LEROBOT_COLUMNS]
    header = LEROBOT_COLUMNS + extras
    fixed: dict[str, Target] = {
        "key": Target("key"),
        "episode_count": Target("episode_count"),
        "frames": Target("frames"),
        "task": Target("task"),
        "storage_uri": Target("storage_uri"),
    }
    for name in extras:
        own = lerobot.own_field(name)
        if own is not None:
            kind, sub = own
            if kind != "condition":
                fixed[name] = Target(kind=kind, name=sub)
                continue
            name_of_dimension = sub
        else:
            name_of_dimension = name
        dim = lookup.dimension(name_of_dimension)
        if dim is not None:
            fixed[name] = Target(kind="condition", name=dim.name, dimension_id=dim.pk)
    columns = build_mapping(
        header=header,
        pairs=request.mapping or None,
        lookup=lookup,
        label=ds.episodes_file,
        fixed=fixed,
    )

    def rows() -> Iterator[bytes]:
        for start in range(0, len(ds.episodes), LEROBOT_BATCH):
            buf = io.StringIO()
            writer = csv.writer(buf, lineterminator="\n")
            for ep in ds.episodes[start : start + LEROBOT_BATCH]:
                writer.writerow(
                    [ep.key, ep.count, ep.length, ep.tasks[0] if ep.tasks else "", ep.storage_uri]
                    + [_csv_scalar(ep.extras.get(name)) for name in extras]
                )
            yield buf.getvalue().encode("utf-8")

    return _Source(
        header=header,
        chunks=rows(),
        delimiter=",",
        has_header=False,
        file_label=ds.episodes_file if not ds.info_only else lerobot.INFO,
        row_offset=0,
        line_label="episode row",
        total_rows=len(ds.episodes),
        total_bytes=0,
        columns=columns,
        format_version=ds.format_version,
        fps=ds.fps,
        lerobot=ds,
    )


def _csv_scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- the run ----------------------------------------------------------------------------


def _run(
    request: ImportRequest,
    reporter: JobContext,
    lookup: ConditionLookup,
    options: _Options,
    source: _Source,
    staging: Staging,
    started: float,
) -> dict[str, Any]:
    label = source.file_label
    reporter.progress(0, source.total_rows, "Reading the source", force=True)
    staging_from = time.monotonic()
    staging.create()
    bytes_done = 0

    def on_chunk(rows: int, nbytes: int) -> None:
        nonlocal bytes_done
        bytes_done += nbytes
        total = source.total_rows
        if total is None and bytes_done and source.total_bytes:
            total = max(rows, int(rows * source.total_bytes / bytes_done))
        reporter.progress(rows, total, f"Staged {rows:,} rows")

    rows = staging.copy(
        source.chunks, delimiter=source.delimiter, header=source.has_header, on_chunk=on_chunk
    )
    if rows == 0:
        empty = "the file has a header but no rows" if source.has_header else "the file has no rows"
        raise ImportFailed.one(label, empty)
    reporter.progress(rows, rows, f"Checking {rows:,} rows", force=True)
    # The next phases are single statements over all rows: no progress in between. How long
    # they take is told at the pace of the organization's earlier staged imports.
    reporter.extend_lease(60 + rows * LEASE_SECONDS_PER_ROW)
    phases = {"open": staging_from - started, "stage": time.monotonic() - staging_from}
    pace = staged_import_pace(organization_id=request.organization_id)
    if pace is not None:
        reporter.expect(phases["stage"] * pace.after_staging)

    columns = source.columns
    key_col = next((c for c in columns if c.target.kind == "key"), None)
    lookup_cols = [
        c
        for c in columns
        if c.target.kind in ("condition", "site", "embodiment", "task", "failure_mode")
    ]
    cond_cols = [c for c in columns if c.target.kind == "condition"]
    resolved = Resolved()
    distinct = staging.distinct_values([c.index for c in lookup_cols])
    lookup_problems = resolve_lookups(
        organization_id=request.organization_id,
        create_values=request.create_values,
        lookup=lookup,
        lookup_cols=lookup_cols,
        distinct=distinct,
        resolved=resolved,
        label=label,
        line_label=source.line_label,
    )
    combos = Combinations(cond_cols, resolved)
    staging.load_vmap(combos.vmap_entries(resolved), term_type=combos.sql_type)
    staging.build_typed(
        TypedPlan(
            columns=columns,
            default_fps=source.fps,
            row_offset=source.row_offset,
            condition_indexes=[c.index for c in cond_cols],
            combination_type=combos.sql_type,
        )
    )
    reporter.progress(rows, rows, f"Checking {rows:,} rows", force=True)
    checked = staging.check(columns)
    problems = checked.problems + lookup_problems
    if problems:
        problems.sort(key=lambda p: p.row or 0)
        raise ImportFailed(problems, total=checked.bad_cells + len(lookup_problems))
    combinations = staging.combinations() if cond_cols else []
    reporter.progress(rows, rows, f"Writing {rows:,} rows", force=True)
    reporter.extend_lease(60 + rows * LEASE_SECONDS_PER_ROW)
    if pace is not None:
        reporter.expect(phases["stage"] * pace.after_checking)
    phases["check"] = time.monotonic() - staging_from - phases["stage"]

    failure: BaseException | None = None
    try:
        with transaction.atomic():
            summary = _write(
                request, reporter, options, source, staging, resolved, combos, combinations, checked
            )
            committing = time.monotonic()
        phases["commit"] = time.monotonic() - committing
    except (DataError, IntegrityError, ProgrammingError) as exc:
        failure = exc
    if failure is not None:
        cause = failure.__cause__
        if (
            isinstance(cause, pg_errors.CardinalityViolation | pg_errors.UniqueViolation)
            and key_col
        ):
            raise ImportFailed(staging.duplicate_keys(key_column=key_col.name)) from None
        if isinstance(cause, pg_errors.DataError):
            # Dates are checked loosely up front; a strict pass says which cell was wrong.
            strict = staging.strict_problems(columns)
            if strict:
                raise ImportFailed(strict) from None
        first = (str(failure).strip().splitlines() or ["invalid value"])[0]
        raise ImportFailed.one(label, f"the episodes could not be stored ({first})") from None

    summary = _finish(summary, source, rows, checked.episodes, checked.frames)
    summary["seconds"] = round(time.monotonic() - started, 3)
    phases["upsert"] = summary.pop("upsert_seconds")
    phases["write"] = summary["seconds"] - sum(phases.values())
    summary["phases"] = {k: round(v, 3) for k, v in phases.items()}
    return summary


# --- the write phase --------------------------------------------------------------------


def _dataset(request: ImportRequest, source: _Source, embodiment: Embodiment | None) -> Any:
    return dataset_for_import(
        organization_id=request.organization_id,
        dataset_name=request.dataset_name,
        source_name=request.source_name,
        format_version=source.format_version,
        header=source.header,
        columns=source.columns,
        lerobot_dataset=source.lerobot,
        embodiment=embodiment,
    )


def _dataset_wide_values(options: _Options, created_values: list[str]) -> dict[int, int]:
    """The --set values as dimension id -> value id, creating those asked for."""
    set_ids: dict[int, int] = {}
    for dim_id, value in options.set_values.items():
        if isinstance(value, tuple):
            set_ids[dim_id] = create_value(value[0], value[1])
            created_values.append(value[1])
        else:
            set_ids[dim_id] = value
    return set_ids


def _outcome(
    *,
    request: ImportRequest,
    source: _Source,
    dataset: Any,
    inserted: int,
    updated: int,
    unchanged: int,
    removed: int,
    created: dict[str, Any],
    warnings: list[str],
    counts: DatasetCounts | None = None,
) -> dict[str, Any]:
    """The summary's description of what the import stored (both paths); ``counts`` are the
    dataset's when the caller has them (the direct load counts what it writes)."""
    breakdown = dataset_breakdown(dataset_id=dataset.pk, counts=counts)
    return {
        "dataset": {"id": dataset.pk, "name": dataset.name, "slug": dataset.slug},
        "format": request.format,
        "format_version": source.format_version,
        "inserted": inserted,
        "updated": updated,
        "unchanged": unchanged,
        "removed": removed,
        "info_only": bool(source.lerobot and source.lerobot.info_only),
        "conditions": [
            {
                "dimension": d.name,
                "values": [{"value": v.label, "episodes": v.episodes} for v in d.values],
                "not_recorded": d.not_recorded,
            }
            for d in breakdown.dimensions
        ],
        "sites": [{"site": s.name, "episodes": s.episodes} for s in breakdown.sites],
        "created": created,
        "warnings": warnings,
    }


def _finish(
    summary: dict[str, Any], source: _Source, rows: int, episodes: int, frames: int
) -> dict[str, Any]:
    summary["rows"] = rows
    summary["episodes"] = episodes
    summary["frames"] = frames
    summary["mapping"] = describe_mapping(source.columns)
    mapped = {c.index for c in source.columns}
    summary["ignored_columns"] = [h for i, h in enumerate(source.header) if i not in mapped][:50]
    return summary


# --- the direct load ----------------------------------------------------------------------


def _why_not_direct(request: ImportRequest, source: _Source) -> str | None:
    if not direct.ENABLED:
        return "turned off"
    if source.batches is None:
        return "a LeRobot dataset is small: the staging path reads it"
    return direct.ineligible(source.columns)


def _run_direct(
    request: ImportRequest,
    reporter: JobContext,
    lookup: ConditionLookup,
    options: _Options,
    source: _Source,
    started: float,
) -> dict[str, Any]:
    """The one-pass load into a new dataset (:mod:`labeling.importers.direct`).

    Raises direct.NotDirect (after rolling back) when the staging path must run instead.
    """
    assert source.batches is not None
    reporter.progress(0, source.total_rows, "Writing the episodes", force=True)
    reporter.extend_lease(60 + (source.total_rows or 1_000_000) * LEASE_SECONDS_PER_ROW)
    org = request.organization_id
    with transaction.atomic():
        created: dict[str, Any] = {}
        created_values: list[str] = []
        set_ids = _dataset_wide_values(options, created_values)
        dataset = _dataset(request, source, options.embodiment)
        if Episode.objects.filter(dataset=dataset).exists():
            raise direct.NotDirect("the dataset holds episodes: the staging path updates them")
        result = direct.load(
            source=source,
            organization_id=org,
            dataset_id=dataset.pk,
            default_site=options.site.pk if options.site else None,
            default_embodiment=options.embodiment.pk if options.embodiment else None,
            set_ids=set_ids,
            default_fps=source.fps,
            create_values_asked=request.create_values,
            lookup=lookup,
            reporter=reporter,
        )
        if result.rows == 0:
            raise direct.NotDirect("no rows")
        _check_cancel(reporter)
        created_values += result.created_values
        if created_values:
            created["condition_values"] = sorted(set(created_values))
        if result.created_tasks:
            created["tasks"] = result.created_tasks
        if request.import_id is not None:
            from labeling.models import InventoryImport

            InventoryImport.objects.filter(pk=request.import_id).update(dataset=dataset)
        summary = _outcome(
            request=request,
            source=source,
            dataset=dataset,
            inserted=result.rows,
            updated=0,
            unchanged=0,
            removed=0,
            created=created,
            warnings=[],
            counts=result.counts,
        )
        committing = time.monotonic()
    totals = result.counts.totals
    summary = _finish(summary, source, result.rows, totals.episodes, totals.frames)
    summary["seconds"] = round(time.monotonic() - started, 3)
    summary["phases"] = {
        "load": round(result.seconds, 3),
        "commit": round(time.monotonic() - committing, 3),
    }
    summary["path"] = {"direct": True, "why": None}
    return summary


def _check_cancel(reporter: JobContext) -> None:
    if reporter.cancel_requested():
        raise JobCancelled("Cancelled at the user's request; nothing was written.")


def _write(
    request: ImportRequest,
    reporter: JobContext,
    options: _Options,
    source: _Source,
    staging: Staging,
    resolved: Resolved,
    combos: Combinations,
    combinations: list[tuple[int, int]],
    checked: Any,
) -> dict[str, Any]:
    _check_cancel(reporter)
    org = request.organization_id
    created: dict[str, Any] = {}
    warnings: list[str] = list(source.lerobot.warnings) if source.lerobot else []

    # Condition values and tasks asked for by the data.
    created_values = create_values(resolved)
    set_ids = _dataset_wide_values(options, created_values)
    if created_values:
        created["condition_values"] = sorted(set(created_values))
    created_tasks = create_tasks(org, resolved)
    if created_tasks:
        created["tasks"] = created_tasks
    staging.load_refs(resolved.refs)

    embodiment = options.embodiment
    if source.lerobot is not None:
        embodiment = lerobot_embodiment(
            org, source.lerobot, options.embodiment, request.dataset_name, warnings, created
        )

    dataset = _dataset(request, source, embodiment)

    # Condition sets: one per distinct combination; dataset-wide values fill the gaps.
    fixed_cs: int | None = None
    interned_ids: list[int] = []
    if combos.columns:
        keys = [combos.value_ids(combo, resolved, set_ids) for combo, _n in combinations]
        interned = condition_sets_intern(organization=org, combinations=[k for k in keys if k])
        interned_ids = list(interned.values())
        staging.load_cmap(
            (
                (combo, interned.get(key) if key else None)
                for (combo, _n), key in zip(combinations, keys, strict=True)
            ),
            combo_type=combos.sql_type,
        )
    elif set_ids:
        key = tuple(sorted(set_ids.values()))
        fixed_cs = condition_sets_intern(organization=org, combinations=[key])[key]

    _check_cancel(reporter)
    before = Episode.objects.filter(dataset=dataset).count()
    kinds = {c.target.kind for c in source.columns}
    key_column = next((c.name for c in source.columns if c.target.kind == "key"), None)
    plan = UpsertPlan(
        organization_id=org,
        dataset_id=dataset.pk,
        default_site=options.site.pk if options.site else None,
        default_embodiment=embodiment.pk if embodiment else None,
        fixed_condition_set=fixed_cs,
        has=kinds,
        combinations=bool(combos.columns),
        update_conditions=bool(combos.columns or set_ids),
        fresh=before == 0,
    )
    if not plan.fresh and key_column is not None:
        # ON CONFLICT would quietly let a later row win when the earlier one changes nothing.
        duplicates = staging.duplicate_keys(key_column=key_column)
        if duplicates:
            raise ImportFailed(duplicates)
    by_kind: dict[str, list[int]] = {}
    for ident in resolved.keys:
        if ident[0] in ("site", "embodiment", "task", "failure_mode"):
            by_kind.setdefault(ident[0], []).append(ident[1])
    lock_references(
        sites=by_kind.get("site", []) + ([options.site.pk] if options.site else []),
        embodiments=by_kind.get("embodiment", []) + ([embodiment.pk] if embodiment else []),
        tasks=by_kind.get("task", []) + [resolved.refs[k] for k in resolved.new_tasks],
        failure_modes=by_kind.get("failure_mode", []),
        condition_sets=[*interned_ids, *([fixed_cs] if fixed_cs else [])],
    )
    upsert_started = time.monotonic()
    changed = staging.upsert(plan)
    upsert_seconds = time.monotonic() - upsert_started
    after = changed if plan.fresh else Episode.objects.filter(dataset=dataset).count()
    removed = 0
    if source.lerobot is not None:
        # A LeRobot dataset is imported whole: episodes it no longer lists go (e.g. the
        # single 'all' row of an earlier info-only import once the episode list arrives).
        keys_now = [e.key for e in source.lerobot.episodes]
        removed, _ = (
            Episode.objects.filter(dataset=dataset, provenance=Episode.Provenance.IMPORTED)
            .exclude(key__in=keys_now)
            .delete()
        )
    _check_cancel(reporter)
    if request.import_id is not None:
        from labeling.models import InventoryImport

        InventoryImport.objects.filter(pk=request.import_id).update(dataset=dataset)

    inserted = after - before
    summary = _outcome(
        request=request,
        source=source,
        dataset=dataset,
        inserted=inserted,
        updated=changed - inserted,
        unchanged=checked.rows - changed,
        removed=removed,
        created=created,
        warnings=warnings,
    )
    summary["upsert_seconds"] = round(upsert_seconds, 3)
    return summary


# --- LeRobot embodiments ------------------------------------------------------------------
