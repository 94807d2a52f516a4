"""The cell-cleaning rules of an import, in one public place (plain Python, no SQL, no pyarrow).

An imported cell is text. These constants say what counts as blank, which characters are
trimmed and may group thousands, which texts are whole numbers, decimals and dates, which
words are outcomes and statuses, and the integer limits of the columns they land in. The
staging path turns them into SQL (:mod:`labeling.importers.cells`), the direct load into
pyarrow compute calls (:mod:`labeling.importers.direct`), lookups into Python
(:mod:`labeling.importers.resolve`): all read them from here, so the paths cannot drift.
"""

from __future__ import annotations

# Cells that mean "no value". Compared after trimming and lower-casing.
BLANKS = ("", "n/a", "na", "null", "none", "nan", "-", "--", "—", "?", "#n/a")

# Trimmed from both ends of every cell (spaces, tabs, line ends, no-break spaces).
TRIM = " \t\r\n\u00a0\u202f"

# Characters that may group thousands in a number ("12,345", "12 345", "12'345").
GROUP_SEPARATORS = ",' _\u00a0\u202f"

WHOLE_RE = r"^[+]?([0-9]+|[0-9]{1,3}([" + GROUP_SEPARATORS + r"][0-9]{3})+)([.]0*)?$"
"""A whole number, optionally grouped in thousands, optionally with a zero fraction."""

DECIMAL_RE = (
    r"^[+-]?(([0-9]+|[0-9]{1,3}([" + GROUP_SEPARATORS + r"][0-9]{3})+)([.][0-9]*)?|[.][0-9]+)"
    r"([eE][+-]?[0-9]+)?$"
)
"""A decimal number, optionally grouped in thousands, optionally with an exponent."""

DATE_RE = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"([ T]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]+)?)?"
    r"([Zz]|[+-](0[0-9]|1[0-4])(:?[0-5][0-9])?)?)?$"
)
"""An ISO 8601 date or date-time with its fields in range (the strict-dates check)."""

DIRECT_DATE_RE = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"([ T]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]{1,6})?)?"
    r"(Z|[+-](0[0-9]|1[0-4])(:?[0-5][0-9])?)?)?$"
)
"""The dates the direct load types itself (others go to the staging path, where PostgreSQL
parses them): :data:`DATE_RE` with at most microseconds and an upper-case ``Z``."""

OUTCOMES = {
    "success": ("success", "succeeded", "successful", "ok", "pass", "passed", "true", "yes", "1"),
    "failure": ("failure", "failed", "fail", "false", "no", "0"),
    "unknown": ("unknown",),
}
"""Words an outcome cell may hold (lower-cased), per outcome."""

# Statuses an import may carry (a re-imported export keeps its sync and label status).
STATUSES = {
    "sync_status": ("unknown", "synced", "desynced", "incomplete"),
    "label_status": ("unlabelled", "in_progress", "labelled", "accepted", "rejected"),
}

INT4_MAX = 2**31 - 1
"""The largest episode count (an ``integer`` column)."""

INT8_MAX = 2**63 - 1
"""The largest frame count (a ``bigint`` column)."""

WHOLE_KINDS = ("episode_count", "frames")
"""Mapped fields parsed as whole numbers."""

DECIMAL_KINDS = ("duration_s", "fps", "feature")
"""Mapped fields parsed as decimal numbers."""
