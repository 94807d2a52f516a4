"""Resolving lookup values: raw cells → condition values, sites, embodiments, tasks,
failure modes.

Distinct raw values come from one scan of the staged rows; they are matched here, in Python,
against the organization's taxonomy (case-, space- and punctuation-insensitively), and each
gets a small integer *value key*. Condition columns are then folded into one combination key
per row (:class:`Combinations`), so condition sets are interned per combination, not per row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from labeling.importers.errors import ImportProblem
from labeling.importers.mapping import MappedColumn, norm
from labeling.importers.rules import BLANKS, TRIM
from sites.models import Embodiment, FailureMode, Site, Task
from sites.services import ConditionLookup


class Resolved:
    """Lookup values found in the staged rows, keyed by small integers (value keys)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[Any, ...], int] = {}
        self.refs: dict[int, int] = {}  # value key -> id (condition value, site, task, ...)
        self.dimension_of: dict[int, int] = {}  # condition value key -> dimension id
        self.new_values: dict[int, tuple[int, str]] = {}  # value key -> (dimension id, label)
        self.new_tasks: dict[int, str] = {}  # value key -> task name
        self.entries: list[tuple[int, str, int, int | None]] = []  # col, raw, vkey, id

    def key_for(self, ident: tuple[Any, ...]) -> int:
        if ident not in self.keys:
            self.keys[ident] = len(self.keys)
        return self.keys[ident]


def resolve_lookups(
    *,
    organization_id: int,
    create_values: bool,
    lookup: ConditionLookup,
    lookup_cols: list[MappedColumn],
    distinct: dict[int, list[tuple[str, int, int]]],
    resolved: Resolved,
    label: str,
    line_label: str,
) -> list[ImportProblem]:
    """Map every distinct raw lookup value to an id (or to something to create)."""
    org = organization_id
    problems: list[ImportProblem] = []
    sites = list(Site.objects.filter(organization_id=org))
    embodiments = list(Embodiment.objects.filter(organization_id=org))
    tasks = list(Task.objects.filter(organization_id=org))
    by_norm: dict[str, dict[str, int]] = {
        "site": _index(sites, ("slug", "name")),
        "embodiment": _index(embodiments, ("slug", "name", "robot_type")),
        "task": _index(tasks, ("slug", "name")),
        "failure_mode": _index(
            list(FailureMode.objects.filter(organization_id=org)), ("code", "name")
        ),
    }
    for col in lookup_cols:
        values = distinct.get(col.index, [])
        if len(values) >= 10_000:
            problems.append(
                ImportProblem(
                    label,
                    f"holds 10,000 or more different values; {col.target} expects a short list "
                    "of names. Is the mapping right?",
                    column=col.name,
                )
            )
            continue
        unknown: list[tuple[str, int, int]] = []
        kind = col.target.kind
        # In row order, so a new value or task is spelled as it first appears.
        for raw, count, first_row in sorted(values, key=lambda v: v[2]):
            text = raw.strip(TRIM)
            n = norm(text)
            if kind == "condition":
                dim_id = col.target.dimension_id
                assert dim_id is not None
                # A taxonomy value wins over a blank marker ("none" may be a real value).
                value_id = lookup.value_id(col.target.name, text)
                if value_id is None and text.lower() in BLANKS:
                    continue
                if value_id is not None:
                    vkey = resolved.key_for(("value", value_id))
                    resolved.refs[vkey] = value_id
                elif create_values:
                    vkey = resolved.key_for(("new-value", dim_id, n))
                    resolved.new_values.setdefault(vkey, (dim_id, text))
                else:
                    unknown.append((text, count, first_row))
                    continue
                resolved.dimension_of[vkey] = dim_id
                resolved.entries.append((col.index, raw, vkey, resolved.refs.get(vkey)))
            elif text.lower() in BLANKS and n not in by_norm[kind]:
                continue
            elif kind == "task":
                task_id = by_norm["task"].get(n)
                if task_id is None:
                    vkey = resolved.key_for(("new-task", n))
                    resolved.new_tasks.setdefault(vkey, text)
                else:
                    vkey = resolved.key_for(("task", task_id))
                    resolved.refs[vkey] = task_id
                resolved.entries.append((col.index, raw, vkey, resolved.refs.get(vkey)))
            else:
                found = by_norm[kind].get(n)
                if found is None:
                    unknown.append((text, count, first_row))
                    continue
                vkey = resolved.key_for((kind, found))
                resolved.refs[vkey] = found
                resolved.entries.append((col.index, raw, vkey, found))
        if unknown:
            problems.extend(
                _unknown_problems(kind, col, unknown, lookup, by_norm, label, line_label)
            )
    return problems


def _index(objects: list[Any], fields: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for obj in objects:
        for f in fields:
            value = getattr(obj, f) or ""
            if value:
                out.setdefault(norm(value), obj.pk)
    return out


def _unknown_problems(
    kind: str,
    col: MappedColumn,
    unknown: list[tuple[str, int, int]],
    lookup: ConditionLookup,
    by_norm: dict[str, dict[str, int]],
    label: str,
    line_label: str,
) -> list[ImportProblem]:
    # One problem per distinct normalised value, with how many rows carry it.
    merged: dict[str, tuple[str, int, int]] = {}
    for text, count, first_row in unknown:
        n = norm(text)
        if n in merged:
            t, c, r = merged[n]
            merged[n] = (t, c + count, min(r, first_row))
        else:
            merged[n] = (text, count, first_row)
    if kind == "condition":
        known = sorted(lookup.dimension_values.get(norm(col.target.name), set()))
        what = f"{col.target.name} value"
        hint = "add it to the taxonomy or pass --create-values"
    else:
        known = sorted(by_norm[kind])[:12]
        what = kind.replace("_", " ")
        hint = f"create the {what} first, or map the column to extra:{col.name}"
    known_text = ", ".join(known) if known else "none defined"
    listing = ", ".join(repr(t) for t, _c, _r in sorted(merged.values(), key=lambda v: v[2])[:10])
    out = [
        ImportProblem(
            file=label,
            row=first_row,
            column=col.name,
            line_label=line_label,
            message=f"unknown {what} {text!r} ({count} row{'s' if count != 1 else ''}); "
            f"known: {known_text}; {hint}",
        )
        for text, count, first_row in sorted(merged.values(), key=lambda v: v[2])
    ]
    if len(merged) > 1:
        out.insert(
            0,
            ImportProblem(
                file=label,
                column=col.name,
                message=f"{len(merged)} unknown {what}s: {listing}",
            ),
        )
    return out


class Combinations:
    """Condition columns folded into one integer per row (a mixed-radix number).

    Each condition column's value keys get digits 1..k (0: no value); the row's key is
    the sum of digit × place over the columns, so counting combinations is a GROUP BY on
    one column and the write joins one small table.
    """

    def __init__(self, columns: list[MappedColumn], resolved: Resolved) -> None:
        self.columns = [c.index for c in columns]
        per_column: dict[int, list[int]] = {i: [] for i in self.columns}
        for col, _raw, vkey, _ref in resolved.entries:
            if col in per_column and vkey not in per_column[col]:
                per_column[col].append(vkey)
        self.digits: dict[tuple[int, int], int] = {}
        self.vkey_at: dict[tuple[int, int], int] = {}
        self.place: dict[int, int] = {}
        self.radix: dict[int, int] = {}
        place = 1
        for col in self.columns:
            for d, vkey in enumerate(per_column[col], start=1):
                self.digits[(col, vkey)] = d
                self.vkey_at[(col, d)] = vkey
            self.place[col] = place
            self.radix[col] = len(per_column[col]) + 1
            place *= self.radix[col]
        self.sql_type = "bigint" if place < 2**62 else "numeric"

    def vmap_entries(self, resolved: Resolved) -> Iterator[tuple[int, str, int, int | None]]:
        for col, raw, vkey, _ref in resolved.entries:
            d = self.digits.get((col, vkey))
            yield col, raw, vkey, d * self.place[col] if d is not None else None

    def value_ids(self, combo: int, resolved: Resolved, set_ids: dict[int, int]) -> tuple[int, ...]:
        """The sorted condition value ids a combination key stands for (with --set values)."""
        ids: dict[int, int] = {}
        for col in self.columns:
            d = (combo // self.place[col]) % self.radix[col]
            if d:
                vkey = self.vkey_at[(col, d)]
                ids[resolved.dimension_of[vkey]] = resolved.refs[vkey]
        for dim_id, value_id in set_ids.items():
            ids.setdefault(dim_id, value_id)  # values in the rows win over dataset-wide ones
        return tuple(sorted(ids.values()))
