"""The capture report: per-topic statistics and check verdicts, as JSON or as text."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .checks import Check


@dataclass(frozen=True)
class TopicReport:
    """Statistics of one topic; times are log times, ``*_s`` offsets from the recording start."""

    topic: str
    schema_name: str
    schema_encoding: str
    message_encoding: str
    count: int
    first_time_ns: int | None
    last_time_ns: int | None
    span_s: float
    rate_hz: float | None
    mean_interval_ms: float | None
    jitter_ms: float | None
    longest_gap_ms: float | None
    longest_gap_at_s: float | None
    note: str | None


@dataclass(frozen=True)
class FileReport:
    path: str
    size_bytes: int
    messages: int
    chunks: int
    compression: list[str]
    has_summary: bool


@dataclass(frozen=True)
class CaptureReport:
    """Outcome of validating one recording; ``passed`` is true when every check passed."""

    passed: bool
    files: list[FileReport]
    duration_s: float
    start_time_ns: int | None
    message_count: int
    topics: list[TopicReport]
    checks: list[Check]
    spec_slug: str | None = None

    @property
    def failed_checks(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    def check(self, name: str) -> Check:
        """Return the check called ``name``; raises KeyError when the report has none."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def topic(self, name: str) -> TopicReport:
        """Return the statistics of topic ``name``; raises KeyError when it is not in the recording."""
        for topic in self.topics:
            if topic.topic == name:
                return topic
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain JSON-serialisable data (non-finite floats become None)."""
        return {
            "passed": self.passed,
            "spec": self.spec_slug,
            "files": [asdict(f) for f in self.files],
            "duration_s": _plain(self.duration_s),
            "start_time_ns": self.start_time_ns,
            "message_count": self.message_count,
            "topics": [_plain(asdict(t)) for t in self.topics],
            "checks": [_plain(asdict(c)) for c in self.checks],
        }

    def to_text(self) -> str:
        """Render the report for a field lead: verdict, failed checks with evidence, topics."""
        verdict = "PASSED" if self.passed else "FAILED"
        names = ", ".join(f.path.rsplit("/", 1)[-1] for f in self.files)
        lines = [
            f"Capture report{f' for {self.spec_slug}' if self.spec_slug else ''}: {verdict}",
            f"Files: {names}",
            f"Duration: {_seconds(self.duration_s)}, {self.message_count:,} messages "
            f"on {len(self.topics)} topics",
        ]
        failed = self.failed_checks
        if failed:
            lines += ["", f"Failed checks ({len(failed)}):"]
            for check in failed:
                lines.append(f"  ✗ {check.name}: {check.message}")
                lines += _evidence_lines(check.evidence, indent=6)
        passed = [check for check in self.checks if check.passed]
        if passed:
            lines += ["", "Passed checks:"]
            lines += [f"  ✓ {check.name}: {check.message}" for check in passed]
        lines += ["", "Topics:", _topic_table(self.topics)]
        return "\n".join(lines)


def _plain(value: Any) -> Any:
    """Make ``value`` JSON-safe: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        items = sorted(value) if isinstance(value, set) else value
        return [_plain(v) for v in items]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _seconds(value: float) -> str:
    if value == 0 or value >= 0.01:
        return f"{value:.2f} s"
    return f"{value * 1e9:,.0f} ns"


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    if isinstance(value, float):
        if value != 0 and abs(value) < 0.001:
            return "<0.001"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _is_flat(value: dict[str, Any]) -> bool:
    return all(
        not isinstance(v, dict)
        and not (isinstance(v, list) and any(isinstance(x, dict | list) for x in v))
        for v in value.values()
    )


def _evidence_lines(evidence: dict[str, Any], indent: int) -> list[str]:
    lines: list[str] = []
    pad = " " * indent
    for key, value in evidence.items():
        if isinstance(value, dict):
            if not value:
                continue
            if _is_flat(value):
                inline = ", ".join(f"{k}={_number(v)}" for k, v in value.items())
                lines.append(f"{pad}{key}: {inline}")
            else:
                lines.append(f"{pad}{key}:")
                lines += _evidence_lines(value, indent + 2)
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: {', '.join(_number(v) for v in value) or '-'}")
        else:
            lines.append(f"{pad}{key}: {_number(value)}")
    return lines


def _topic_table(topics: list[TopicReport]) -> str:
    header = ("topic", "schema", "count", "rate Hz", "jitter ms", "longest gap ms", "note")
    rows = [header] + [
        (
            t.topic,
            t.schema_name or "-",
            f"{t.count:,}",
            _number(t.rate_hz),
            _number(t.jitter_ms),
            _number(t.longest_gap_ms),
            t.note or "",
        )
        for t in topics
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append(("  " + "  ".join([*cells, row[-1]])).rstrip())
    return "\n".join(lines)
