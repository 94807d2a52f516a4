"""Evaluation results in: per-episode or per-cell outcomes of a policy version, from CSV, JSON or the API.

Per-cell rows carry ``trials`` and ``successes`` (optionally failure counts per mode);
per-episode rows carry an ``outcome`` (success/failure) and optionally a ``failure_mode``.
Condition columns are named by dimension slug or name; values by slug or label, in any
case. Every problem names the row and column; nothing is written unless all rows are good.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.db import transaction

from accounts.models import Organization
from accounts.parsers import first_lone_surrogate, json_too_deep, lone_surrogate_refusal
from accounts.services import audit_record
from analytics.models import EvaluationFailure, EvaluationResult, EvaluationRun, PolicyVersion
from sites.models import Deployment, FailureMode
from sites.services import ConditionLookup, condition_lookup, condition_sets_intern

RESERVED = {
    "trials",
    "successes",
    "outcome",
    "failure_mode",
    "failure_modes",
    "episode",
    "episode_id",
    "notes",
    "site",
}
MAX_PROBLEMS = 20


class EvaluationImportError(ValueError):
    """The results cannot be imported; ``problems`` lists the first ones with row and column."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            "; ".join(problems[:5])
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )
        self.problems = problems[:MAX_PROBLEMS]


@dataclass
class ParsedResults:
    cells: dict[tuple[int, ...], list[int]] = field(
        default_factory=dict
    )  # key → [trials, successes]
    failures: dict[tuple[int, ...], dict[int, int]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    rows: int = 0
    kind: str = "cell"


# Trials and successes are stored in positive integer columns.
MAX_COUNT = 2**31 - 1


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _int(value: Any, where: str, problems: list[str]) -> int | None:
    text = str(value).strip().replace(",", "").replace("_", "") if value is not None else ""
    try:
        number = float(text)
    except ValueError:
        problems.append(f"{where}: expected a whole number, got {_shown(value)}")
        return None
    if number > MAX_COUNT:  # infinity too
        problems.append(
            f"{where}: expected a whole number of at most {MAX_COUNT:,}, got {_shown(value)}"
        )
        return None
    if not number >= 0 or number != int(number):  # NaN too
        problems.append(f"{where}: expected a whole number of at least 0, got {_shown(value)}")
        return None
    return int(number)


def _failure_modes(organization_id: int) -> dict[str, int]:
    modes = {}
    for mode in FailureMode.objects.filter(organization_id=organization_id):
        modes[mode.code.lower()] = mode.pk
        modes[mode.name.lower()] = mode.pk
    return modes


def parse_results(
    *, organization: Organization, records: list[dict[str, Any]], source: str
) -> ParsedResults:
    """Resolve rows (dicts) to condition sets and counts; raise EvaluationImportError naming problems."""
    lookup: ConditionLookup = condition_lookup(organization=organization)
    modes = _failure_modes(organization.pk)
    problems: list[str] = []
    parsed = ParsedResults()
    combos: list[tuple[int, ...]] = []
    staged: list[tuple[tuple[int, ...], int, int, dict[int, int]]] = []
    if not records:
        raise EvaluationImportError([f"{source}: no result rows"])
    for number, raw in enumerate(records, start=2 if source.endswith((".csv", ".tsv")) else 1):
        where = f"{source} row {number}"
        if not isinstance(raw, dict):
            problems.append(f"{where}: expected an object of columns, got {_shown(raw)}")
            continue
        row = {str(k).strip(): v for k, v in raw.items() if k is not None}
        conditions = row.pop("conditions", None)
        if conditions is None:
            conditions = {
                k: v
                for k, v in row.items()
                if k.lower() not in RESERVED and not k.lower().startswith("failures:")
            }
        if not isinstance(conditions, dict) or not conditions:
            problems.append(
                f"{where}: no condition columns (name them by dimension, e.g. lighting)"
            )
            continue
        value_ids = []
        for dim, value in conditions.items():
            if value is None or str(value).strip().lower() in {
                "",
                "n/a",
                "na",
                "null",
                "none",
                "-",
            }:
                continue
            dimension = lookup.dimension(str(dim))
            if dimension is None:
                problems.append(f"{where}, column {dim!r}: unknown condition dimension")
                continue
            vid = lookup.value_id(str(dim), str(value))
            if vid is None:
                known = ", ".join(sorted(lookup.dimension_values.get(dim.strip().lower(), set())))
                problems.append(
                    f"{where}, column {dim!r}: unknown value {value!r} (known: {known})"
                )
                continue
            value_ids.append(vid)
        failures: dict[int, int] = {}
        if "outcome" in {k.lower() for k in row}:
            outcome = str(next(v for k, v in row.items() if k.lower() == "outcome")).strip().lower()
            if outcome not in {"success", "failure", "1", "0", "true", "false"}:
                problems.append(
                    f"{where}, column 'outcome': expected success or failure, got {outcome!r}"
                )
                continue
            trials, successes = 1, int(outcome in {"success", "1", "true"})
            mode = str(row.get("failure_mode") or "").strip().lower()
            if mode and not successes:
                if mode not in modes:
                    problems.append(
                        f"{where}, column 'failure_mode': unknown failure mode {mode!r}"
                    )
                    continue
                failures[modes[mode]] = 1
            parsed.kind = "episode"
        else:
            t = _int(row.get("trials"), f"{where}, column 'trials'", problems)
            s = _int(row.get("successes"), f"{where}, column 'successes'", problems)
            if t is None or s is None:
                continue
            if s > t:
                problems.append(f"{where}: {s} successes is more than {t} trials")
                continue
            trials, successes = t, s
            fm = row.get("failures") or row.get("failure_modes")
            items: list[tuple[str, Any]] = []
            if isinstance(fm, dict):
                items = list(fm.items())
            elif isinstance(fm, str) and fm.strip():
                items = [tuple(part.split("=", 1)) for part in fm.split(";") if "=" in part]  # type: ignore[misc]
            items += [
                (k.split(":", 1)[1], v) for k, v in row.items() if k.lower().startswith("failures:")
            ]
            for code, count in items:
                code = str(code).strip().lower()
                n = _int(count, f"{where}, failures of {code!r}", problems)
                if code not in modes:
                    problems.append(f"{where}: unknown failure mode {code!r}")
                elif n:
                    failures[modes[code]] = failures.get(modes[code], 0) + n
            if sum(failures.values()) > trials - successes:
                problems.append(
                    f"{where}: {sum(failures.values())} failures by mode but only {trials - successes} failures"
                )
                continue
        if not value_ids:
            continue
        key = tuple(sorted(value_ids))
        combos.append(key)
        staged.append((key, trials, successes, failures))
        if len(problems) >= MAX_PROBLEMS:
            break
    if problems:
        raise EvaluationImportError(problems)
    for key, trials, successes, failures in staged:
        acc = parsed.cells.setdefault(key, [0, 0])
        acc[0] += trials
        acc[1] += successes
        for mode_id, n in failures.items():
            parsed.failures[key][mode_id] = parsed.failures[key].get(mode_id, 0) + n
        parsed.rows += 1
    too_many = [key for key, (trials, _) in parsed.cells.items() if trials > MAX_COUNT]
    if too_many:
        raise EvaluationImportError(
            [
                f"{source}: the rows of {len(too_many)} condition combination(s) add up to more "
                f"than {MAX_COUNT:,} trials; import them as separate runs"
            ]
        )
    return parsed


def read_results_file(*, name: str, content: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a CSV/TSV or JSON results file into (header fields, rows)."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvaluationImportError(
            [f"{name}: not UTF-8 text (byte {content[exc.start]:#04x} at offset {exc.start})"]
        ) from exc
    if not text.strip():
        raise EvaluationImportError([f"{name}: the file is empty"])
    if name.lower().endswith(".json") or text.lstrip().startswith(("{", "[")):
        if json_too_deep(text):
            raise EvaluationImportError([f"{name}: the JSON nests too deep to be results"])
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvaluationImportError(
                [f"{name}: invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"]
            ) from exc
        except RecursionError as exc:
            raise EvaluationImportError([f"{name}: invalid JSON (brackets do not match)"]) from exc
        except ValueError as exc:  # a number with thousands of digits
            raise EvaluationImportError([f"{name}: invalid JSON ({exc})"]) from exc
        where = first_lone_surrogate(data)
        if where is not None:
            raise EvaluationImportError([f"{name}: {lone_surrogate_refusal(where)}"])
        if isinstance(data, list):
            return {}, data
        if not isinstance(data, dict):
            raise EvaluationImportError(
                [f"{name}: expected an object with 'results' or a list of rows"]
            )
        rows = data.pop("results", None) or data.pop("episodes", None)
        if not isinstance(rows, list):
            raise EvaluationImportError([f"{name}: expected a 'results' (or 'episodes') list"])
        return data, rows
    dialect = (
        "excel-tab" if name.lower().endswith(".tsv") or "\t" in text.splitlines()[0] else "excel"
    )
    reader = csv.DictReader(io.StringIO(text), dialect=dialect)
    try:
        if not reader.fieldnames:
            raise EvaluationImportError([f"{name}: no header row"])
        return {}, list(reader)
    except csv.Error as exc:  # a field over csv's size limit, a broken quote
        raise EvaluationImportError([f"{name} line {reader.line_num}: not CSV ({exc})"]) from exc


@transaction.atomic
def evaluation_import(
    *,
    organization: Organization,
    policy_version: PolicyVersion,
    deployment: Deployment | None,
    label: str,
    evaluated_on: date,
    records: list[dict[str, Any]],
    source: str,
    actor: Any = None,
) -> EvaluationRun:
    """Store one evaluation run (replacing a run of the same label) and queue the refit of
    the learning curves (a job that starts once the import commits)."""
    parsed = parse_results(organization=organization, records=records, source=source)
    run, created = EvaluationRun.objects.update_or_create(
        organization=organization,
        policy_version=policy_version,
        label=label,
        defaults={
            "deployment": deployment,
            "site": deployment.site if deployment else None,
            "evaluated_on": evaluated_on,
            "source": source[:200],
        },
    )
    if not created:
        EvaluationResult.objects.filter(run=run).delete()
    set_ids = condition_sets_intern(organization=organization, combinations=list(parsed.cells))
    results = EvaluationResult.objects.bulk_create(
        [
            EvaluationResult(run=run, condition_set_id=set_ids[k], trials=t, successes=s)
            for k, (t, s) in parsed.cells.items()
        ]
    )
    by_key = dict(zip(parsed.cells, results, strict=True))
    EvaluationFailure.objects.bulk_create(
        [
            EvaluationFailure(result=by_key[k], failure_mode_id=m, count=n)
            for k, modes in parsed.failures.items()
            for m, n in modes.items()
            if n
        ]
    )
    audit_record(
        organization=organization,
        actor=actor,
        verb="evaluation.import",
        obj=run,
        changes={"rows": parsed.rows, "cells": len(parsed.cells), "kind": parsed.kind},
    )
    from analytics.services.steering.curves import curves_refit_request

    curves_refit_request(run=run, actor=actor)
    return run


def evaluation_import_file(
    *,
    organization: Organization,
    name: str,
    content: bytes,
    policy: str | None = None,
    deployment: str | None = None,
    label: str | None = None,
    evaluated_on: date | None = None,
    actor: Any = None,
) -> EvaluationRun:
    """Import a results file; header fields of a JSON file fill what the arguments leave out."""
    header, rows = read_results_file(name=name, content=content)
    for key in ("policy", "deployment", "label", "evaluated_on"):
        if header.get(key) is not None and not isinstance(header[key], str):
            raise EvaluationImportError(
                [f"{name}: {key!r} must be text, got {_shown(header[key])}"]
            )
    policy_slug = policy or header.get("policy")
    if not policy_slug:
        raise EvaluationImportError([f"{name}: say which policy version was evaluated (policy)"])
    version = PolicyVersion.objects.filter(organization=organization, slug=policy_slug).first()
    if version is None:
        raise EvaluationImportError([f"{name}: unknown policy version {_shown(policy_slug)}"])
    dep_slug = deployment if deployment is not None else header.get("deployment")
    dep = None
    if dep_slug:
        dep = Deployment.objects.filter(organization=organization, slug=dep_slug).first()
        if dep is None:
            raise EvaluationImportError([f"{name}: unknown deployment {_shown(dep_slug)}"])
    when = evaluated_on
    if when is None and header.get("evaluated_on"):
        try:
            when = date.fromisoformat(header["evaluated_on"])
        except ValueError:
            raise EvaluationImportError(
                [f"{name}: 'evaluated_on' must be a date like 2027-01-31"]
            ) from None
    run_label = label or header.get("label") or name
    if len(run_label) > 200:
        raise EvaluationImportError([f"{name}: the label can be at most 200 characters long"])
    return evaluation_import(
        organization=organization,
        policy_version=version,
        deployment=dep,
        label=run_label,
        evaluated_on=when or date.today(),
        records=rows,
        source=name,
        actor=actor,
    )
