"""Problems an import finds in its input, reported with file, row and column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_REPORTED = 20


@dataclass(frozen=True)
class ImportProblem:
    """One thing wrong with the input, located as precisely as the input allows.

    ``row`` counts as a person sees it: for CSV/TSV the header is row 1 (as in a spreadsheet),
    for Parquet the first data row is row 1, for JSON Lines it is the line number.
    """

    file: str
    message: str
    row: int | None = None
    column: str | None = None
    line_label: str = "row"

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f" {self.line_label} {self.row}"
        if self.column is not None:
            where += (
                f", column {_short(self.column)!r}"
                if self.row is not None
                else (f" column {_short(self.column)!r}")
            )
        return f"{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "row": self.row,
            "column": self.column,
            "message": self.message,
            "text": str(self),
        }


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ImportFailed(Exception):
    """The input cannot be imported; nothing was written. Holds the first 20 problems."""

    def __init__(self, problems: list[ImportProblem], total: int | None = None) -> None:
        self.total = max(total or 0, len(problems))
        self.problems = problems[:MAX_REPORTED]
        super().__init__(self.summary())

    def summary(self) -> str:
        if not self.problems:
            return "The import failed."
        if self.total == 1:
            return str(self.problems[0])
        shown = len(self.problems)
        head = f"{self.total} problems"
        if self.total > shown:
            head += f" (the first {shown} are listed, {self.total - shown} more are not)"
        return f"{head}; the first: {self.problems[0]}"

    @classmethod
    def one(
        cls, file: str, message: str, *, row: int | None = None, column: str | None = None
    ) -> ImportFailed:
        return cls([ImportProblem(file=file, message=message, row=row, column=column)])
