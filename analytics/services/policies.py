"""Policy versions: register or change one, with what it was trained on, audited."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from django.db import transaction

from accounts.models import Organization
from accounts.services import audit_record
from analytics.models import PolicyVersion
from campaigns.models import CollectionRound
from labeling.models import Dataset
from sites.models import Embodiment


@transaction.atomic
def policy_version_save(
    *,
    organization: Organization,
    actor: Any,
    slug: str,
    name: str,
    embodiment: Embodiment,
    released_on: date | None,
    datasets: Iterable[Dataset],
    rounds: Iterable[CollectionRound],
) -> PolicyVersion:
    """Register the policy version ``slug`` of ``organization``, or change the one registered,
    and set the datasets and rounds it was trained on (replacing earlier ones)."""
    policy, created = PolicyVersion.objects.update_or_create(
        organization=organization,
        slug=slug,
        defaults={"name": name or slug, "embodiment": embodiment, "released_on": released_on},
    )
    dataset_ids = sorted(d.pk for d in datasets)
    round_ids = sorted(r.pk for r in rounds)
    policy.trained_on_datasets.set(dataset_ids)
    policy.trained_on_rounds.set(round_ids)
    audit_record(
        organization=organization,
        actor=actor,
        verb="policy_version.create" if created else "policy_version.update",
        obj=policy,
        changes={
            "name": policy.name,
            "embodiment": embodiment.pk,
            "released_on": released_on.isoformat() if released_on else None,
            "trained_on_datasets": dataset_ids,
            "trained_on_rounds": round_ids,
        },
    )
    return policy
