"""Writes for campaigns, rounds, targets, teams and tasks."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from accounts.services import audit_record
from campaigns.models import Campaign, CollectionRound, FieldTeam, new_calendar_token
from labeling.models import Dataset


class RoundTransitionRefused(Exception):
    """A round cannot move to the requested status (names both and what is allowed)."""


def round_transition(
    *, round: CollectionRound, to_status: str, actor: Any = None
) -> CollectionRound:
    """Move a round to ``to_status`` — the one place round status changes.

    The move is a conditional UPDATE on the status the caller saw, so two managers clicking
    at once cannot both move it. Raises RoundTransitionRefused for a move the table forbids
    or when the round changed status meanwhile.
    """
    from_status = round.status
    if to_status not in CollectionRound.Status.values:
        raise RoundTransitionRefused(f"{to_status!r} is not a round status.")
    if not CollectionRound.can_move(from_status, to_status):
        allowed = sorted(CollectionRound.TRANSITIONS.get(from_status, frozenset()))
        raise RoundTransitionRefused(
            f"Round {round.number} is {from_status}; it cannot move to {to_status}"
            + (f" (allowed: {', '.join(allowed)})." if allowed else " (it is closed).")
        )
    with transaction.atomic():
        updated = CollectionRound.objects.filter(pk=round.pk, status=from_status).update(
            status=to_status, status_changed_at=timezone.now()
        )
        if not updated:
            current = (
                CollectionRound.objects.filter(pk=round.pk).values_list("status", flat=True).first()
            )
            raise RoundTransitionRefused(
                f"Round {round.number} changed meanwhile (now {current}); reload and try again."
            )
        audit_record(
            organization=round.campaign.organization_id,
            actor=actor,
            verb="round.status",
            obj=round,
            changes={"status": [from_status, to_status]},
        )
    round.status = to_status
    return round


@transaction.atomic
def round_create(*, campaign: Campaign, actor: Any = None, **fields: Any) -> CollectionRound:
    """Create the campaign's next round in draft, with its own capture dataset.

    Concurrent calls for one campaign queue on its row lock, so each sees the rounds the
    others created and numbers follow on without gaps or duplicates.
    """
    Campaign.objects.select_for_update().filter(pk=campaign.pk).values_list("pk").get()
    number = (campaign.rounds.aggregate(n=Max("number"))["n"] or 0) + 1
    dataset, _ = Dataset.objects.get_or_create(
        organization_id=campaign.organization_id,
        slug=slugify(f"{campaign.slug}-round-{number}")[:100],
        defaults={
            "name": f"{campaign.name} — round {number} capture",
            "source": Dataset.Source.CAPTURED,
        },
    )
    round = CollectionRound.objects.create(
        campaign=campaign, number=number, dataset=dataset, **fields
    )
    audit_record(organization=campaign.organization_id, actor=actor, verb="round.create", obj=round)
    return round


def team_rotate_calendar(*, team: FieldTeam, actor: Any = None) -> FieldTeam:
    """Revoke a team's calendar feed URL by issuing a new token."""
    team.calendar_token = new_calendar_token()
    team.save(update_fields=["calendar_token"])
    audit_record(
        organization=team.organization_id, actor=actor, verb="team.calendar_rotate", obj=team
    )
    return team
