"""Policy versions: register or change one, with what it was trained on, audited."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

from django.db import IntegrityError, transaction

from accounts.models import Organization
from accounts.services import audit_record
from analytics.models import PolicyVersion
from campaigns.models import CollectionRound
from labeling.models import Dataset
from sites.models import Embodiment
from sites.services import fields_set, jsonable, links_check


@transaction.atomic
def policy_version_create(
    *,
    organization: Organization,
    actor: Any,
    fields: Mapping[str, Any],
    datasets: Iterable[Dataset] = (),
    rounds: Iterable[CollectionRound] = (),
) -> PolicyVersion:
    """Register a policy version with the datasets and rounds it was trained on, audited.

    Raises LinkRefused when its embodiment, task, datasets or rounds are another
    organization's.
    """
    datasets, rounds = list(datasets), list(rounds)
    _links_check(organization, fields, datasets, rounds)
    policy = PolicyVersion.objects.create(organization=organization, **fields)
    trained = _trained_on_set(policy, datasets, rounds)
    audit_record(
        organization=organization,
        actor=actor,
        verb="policy_version.create",
        obj=policy,
        changes={"fields": jsonable(dict(fields)), **trained},
    )
    return policy


@transaction.atomic
def policy_version_update(
    *,
    policy: PolicyVersion,
    actor: Any,
    fields: Mapping[str, Any],
    datasets: Iterable[Dataset] | None = None,
    rounds: Iterable[CollectionRound] | None = None,
) -> PolicyVersion:
    """Change a policy version and, when given, replace the datasets or rounds it was
    trained on. Audited.

    Raises LinkRefused as :func:`policy_version_create`.
    """
    policy = PolicyVersion.objects.select_for_update().get(pk=policy.pk)
    datasets = None if datasets is None else list(datasets)
    rounds = None if rounds is None else list(rounds)
    _links_check(policy.organization_id, fields, datasets or [], rounds or [])
    changes: dict[str, Any] = {"fields": fields_set(policy, fields)}
    changes.update(_trained_on_set(policy, datasets, rounds))
    audit_record(
        organization=policy.organization_id,
        actor=actor,
        verb="policy_version.update",
        obj=policy,
        changes=changes,
    )
    return policy


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
    fields = {"name": name or slug, "embodiment": embodiment, "released_on": released_on}
    datasets, rounds = list(datasets), list(rounds)
    existing = PolicyVersion.objects.filter(organization=organization, slug=slug).first()
    if existing is None:
        try:
            # A savepoint: a save of the same new slug that won the race makes this an update.
            with transaction.atomic():
                return policy_version_create(
                    organization=organization,
                    actor=actor,
                    fields={"slug": slug, **fields},
                    datasets=datasets,
                    rounds=rounds,
                )
        except IntegrityError:
            existing = PolicyVersion.objects.get(organization=organization, slug=slug)
    return policy_version_update(
        policy=existing, actor=actor, fields=fields, datasets=datasets, rounds=rounds
    )


def _links_check(
    organization: Organization | int,
    fields: Mapping[str, Any],
    datasets: list[Dataset],
    rounds: list[CollectionRound],
) -> None:
    links_check(
        organization=organization,
        links={
            "embodiment": fields.get("embodiment"),
            "task": fields.get("task"),
            "trained_on_datasets": datasets,
            "trained_on_rounds": rounds,
        },
    )


def _trained_on_set(
    policy: PolicyVersion,
    datasets: list[Dataset] | None,
    rounds: list[CollectionRound] | None,
) -> dict[str, list[int]]:
    """Replace what ``policy`` was trained on (each list when given); return the new ids."""
    trained: dict[str, list[int]] = {}
    if datasets is not None:
        trained["trained_on_datasets"] = sorted(d.pk for d in datasets)
        policy.trained_on_datasets.set(trained["trained_on_datasets"])
    if rounds is not None:
        trained["trained_on_rounds"] = sorted(r.pk for r in rounds)
        policy.trained_on_rounds.set(trained["trained_on_rounds"])
    return trained
