"""Share links to a customer's dashboard: create and revoke, audited."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from accounts.services import audit_record
from analytics.models import DashboardShare

SHARE_DAYS_MAX = 90


@transaction.atomic
def dashboard_share_create(
    *, organization: Organization, customer: Organization, actor: Any, days: int, label: str = ""
) -> DashboardShare:
    """Create a read-only link to ``customer``'s dashboard that expires after ``days`` (1–90).

    Raises ValueError when ``days`` is outside 1–90.
    """
    if not 1 <= days <= SHARE_DAYS_MAX:
        raise ValueError(f"A share link lasts 1 to {SHARE_DAYS_MAX} days, not {days}.")
    share = DashboardShare.objects.create(
        organization=organization,
        customer=customer,
        token=secrets.token_urlsafe(32),
        label=label[:200],
        expires_at=timezone.now() + timedelta(days=days),
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    audit_record(
        organization=organization,
        actor=actor,
        verb="share.create",
        obj=share,
        changes={"days": days, "label": share.label},
    )
    return share


@transaction.atomic
def dashboard_share_revoke(*, share: DashboardShare, actor: Any) -> DashboardShare:
    """Revoke a share link now; revoking a revoked link keeps its first revocation time."""
    share = DashboardShare.objects.select_for_update().get(pk=share.pk)
    if share.revoked_at is None:
        share.revoked_at = timezone.now()
        share.save(update_fields=["revoked_at"])
    audit_record(organization=share.organization_id, actor=actor, verb="share.revoke", obj=share)
    return share
