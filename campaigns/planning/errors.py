"""Domain errors raised by the planning cores."""

from __future__ import annotations


class PlanInfeasible(Exception):
    """A plan cannot satisfy its hard constraints; the message names the one that fails."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
