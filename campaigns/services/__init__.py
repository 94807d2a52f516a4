"""Writes for campaigns: rounds and their status, plans, targets, tasks and calendars."""

from campaigns.services.rounds import (
    RoundTransitionRefused,
    round_create,
    round_transition,
    team_rotate_calendar,
)

__all__ = ["RoundTransitionRefused", "round_create", "round_transition", "team_rotate_calendar"]
