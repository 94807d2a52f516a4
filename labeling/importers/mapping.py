"""Column mappings: which column of a manifest feeds which episode field or condition.

A mapping is a list of ``COLUMN=TARGET`` pairs. Targets:

* episode fields — ``key``, ``episode_count`` (alias ``count``), ``frames``, ``duration_s``
  (``duration``), ``fps``, ``outcome``, ``task``, ``site``, ``embodiment`` (``robot``,
  ``robot_type``), ``storage_uri`` (``uri``), ``recorded_at`` (``date``), ``failure_mode``
  (a failure mode's code or name), ``sync_status`` (unknown, synced, desynced, incomplete),
  ``label_status`` (unlabelled, in_progress, labelled, accepted, rejected);
* ``feature:<name>`` — a number stored in the episode's ``features`` JSON;
* ``extra:<name>`` — text kept in the episode's ``extra`` JSON;
* ``condition:<dimension>``, or just a dimension's slug or name — a condition value;
* ``ignore`` — leave the column out.

Without an explicit mapping, columns whose names match a field (or alias) or a condition
dimension are mapped; every other column is ignored. An explicit mapping is used as given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from labeling.importers.errors import ImportFailed, ImportProblem
from sites.services import ConditionLookup

FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "key": ("key", "episode key", "episode id", "episode", "id"),
    "episode_count": (
        "episode count",
        "count",
        "episodes",
        "# episodes",
        "n episodes",
        "num episodes",
        "number of episodes",
    ),
    "frames": ("frames", "n frames", "num frames", "frame count", "length"),
    "duration_s": ("duration s", "duration", "seconds", "duration sec"),
    "fps": ("fps", "frame rate"),
    "outcome": ("outcome", "result", "success"),
    "task": ("task", "task name"),
    "site": ("site", "site slug", "location"),
    "embodiment": ("embodiment", "robot", "robot type"),
    "storage_uri": ("storage uri", "uri", "url", "storage", "path"),
    "recorded_at": ("recorded at", "recorded", "date", "timestamp"),
    "failure_mode": ("failure mode", "failure mode code"),
    "sync_status": ("sync status",),
    "label_status": ("label status",),
}
FIELDS = tuple(FIELD_ALIASES)
SINGLE_FIELDS = FIELDS  # each may be fed by one column only
LOOKUP_KINDS = ("task", "site", "embodiment", "condition", "failure_mode")


def norm(text: str) -> str:
    """Case-, space- and punctuation-insensitive form (as the condition lookup uses)."""
    return " ".join(str(text).strip().lower().replace("_", " ").replace("-", " ").split())


_ALIAS_TO_FIELD = {
    norm(alias): field for field, aliases in FIELD_ALIASES.items() for alias in aliases
}


@dataclass(frozen=True)
class Target:
    kind: str  # a FIELDS name, "feature", "extra" or "condition"
    name: str = ""  # feature/extra key, or the dimension's name
    dimension_id: int | None = None

    def __str__(self) -> str:
        if self.kind in ("feature", "extra", "condition"):
            return f"{self.kind}:{self.name}"
        return self.kind


@dataclass(frozen=True)
class MappedColumn:
    index: int  # position in the file, staged as column c<index>
    name: str  # the header's name
    target: Target


def parse_pairs(items: Iterable[str], *, what: str, label: str) -> list[tuple[str, str]]:
    """Split ``LEFT=RIGHT`` items (the last ``=`` splits, so column names may contain one)."""
    pairs: list[tuple[str, str]] = []
    problems: list[ImportProblem] = []
    for item in items:
        left, sep, right = str(item).rpartition("=")
        if not sep or not left.strip() or not right.strip():
            problems.append(
                ImportProblem(file=label, message=f"{what} {item!r} is not of the form A=B")
            )
            continue
        pairs.append((left.strip(), right.strip()))
    if problems:
        raise ImportFailed(problems)
    return pairs


def parse_target(text: str, lookup: ConditionLookup) -> Target | str | None:
    """Return the Target for ``text``, None for ``ignore``, or a message if it is unknown."""
    raw = text.strip()
    lowered = raw.lower()
    if lowered in ("ignore", "skip", "-", "none"):
        return None
    prefix, sep, rest = raw.partition(":")
    if sep and prefix.strip().lower() in ("feature", "extra"):
        if not rest.strip():
            return f"{raw!r} needs a name after the colon"
        return Target(kind=prefix.strip().lower(), name=rest.strip())
    if sep and prefix.strip().lower() in ("condition", "dimension"):
        dim = lookup.dimension(rest)
        if dim is None:
            return f"unknown condition dimension {rest.strip()!r} (known: {_known_dims(lookup)})"
        return Target(kind="condition", name=dim.name, dimension_id=dim.pk)
    field = _ALIAS_TO_FIELD.get(norm(raw)) or (
        norm(raw).replace(" ", "_") if norm(raw).replace(" ", "_") in FIELDS else None
    )
    if field is not None:
        return Target(kind=field)
    dim = lookup.dimension(raw)
    if dim is not None:
        return Target(kind="condition", name=dim.name, dimension_id=dim.pk)
    return (
        f"unknown target {raw!r}: use an episode field ({', '.join(FIELDS)}), "
        f"feature:NAME, extra:NAME, ignore, or a condition dimension ({_known_dims(lookup)})"
    )


def _known_dims(lookup: ConditionLookup) -> str:
    names = sorted({d.slug for d in lookup.dimensions.values()})
    return ", ".join(names) if names else "none defined"


def resolve_columns(header: list[str], name: str, *, label: str) -> int | str:
    """Find a header column by name: exact, then case/space-insensitive. Index or message."""
    exact = [i for i, h in enumerate(header) if h == name]
    if len(exact) == 1:
        return exact[0]
    loose = [i for i, h in enumerate(header) if norm(h) == norm(name)]
    if len(exact) > 1 or len(loose) > 1:
        return f"column {name!r} appears more than once in the header"
    if len(loose) == 1:
        return loose[0]
    shown = ", ".join(repr(h if len(h) <= 40 else h[:39] + "…") for h in header[:40])
    return f"no column {name!r}; the columns are: {shown}"


def build_mapping(
    *,
    header: list[str],
    pairs: list[tuple[str, str]] | None,
    lookup: ConditionLookup,
    label: str,
    fixed: dict[str, Target] | None = None,
) -> list[MappedColumn]:
    """Turn the header and the requested pairs into mapped columns, or raise ImportFailed.

    ``fixed`` maps column names to targets that always apply (a LeRobot import's own
    columns); ``pairs`` add to them (or, for a manifest, are the whole mapping when given).
    """
    problems: list[ImportProblem] = []
    mapped: dict[int, Target | None] = {}
    for col, target in (fixed or {}).items():
        mapped[header.index(col)] = target
    if pairs:
        for column, target_text in pairs:
            found = resolve_columns(header, column, label=label)
            if isinstance(found, str):
                problems.append(ImportProblem(file=label, message=f"--map {column}=…: {found}"))
                continue
            parsed = parse_target(target_text, lookup)
            if isinstance(parsed, str):
                problems.append(
                    ImportProblem(file=label, column=header[found], message=f"mapping: {parsed}")
                )
                continue
            mapped[found] = parsed
    elif fixed is None:
        taken: set[str] = set()
        for i, name in enumerate(header):
            field = _ALIAS_TO_FIELD.get(norm(name))
            if field is not None and field not in taken:
                mapped[i] = Target(kind=field)
                taken.add(field)
                continue
            dim = lookup.dimension(name)
            if dim is not None and f"condition:{dim.pk}" not in taken:
                mapped[i] = Target(kind="condition", name=dim.name, dimension_id=dim.pk)
                taken.add(f"condition:{dim.pk}")
    result = [
        MappedColumn(index=i, name=header[i], target=t)
        for i, t in sorted(mapped.items())
        if t is not None
    ]
    seen: dict[str, str] = {}
    for mc in result:
        key = (
            f"condition:{mc.target.dimension_id}"
            if mc.target.kind == "condition"
            else str(mc.target)
        )
        if key in seen:
            problems.append(
                ImportProblem(
                    file=label,
                    column=mc.name,
                    message=f"both {seen[key]!r} and {mc.name!r} are mapped to {mc.target}",
                )
            )
        seen[key] = mc.name
    if problems:
        raise ImportFailed(problems)
    return result


_SET_RE = re.compile(r"\s*=\s*")


def describe_mapping(columns: list[MappedColumn]) -> dict[str, str]:
    return {c.name: str(c.target) for c in columns}
