"""seed_label_demo: a label job for the demo round's dataset, ready to show the labelling flow."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Organization
from campaigns.models import Campaign
from frontend.demo.world import refresh_statistics
from labeling.labels.selectors import label_schema
from labeling.labels.services import annotation_submit, gold_label_set, label_job_create
from labeling.models import Episode, LabelAssignment, LabelItem, LabelJob
from sites.models import ConditionDimension


class Command(BaseCommand):
    help = (
        "Give the demo's round 1 a label job: a few of its episodes back to unlabelled (for "
        "the annotator to label from the keyboard), two gold episodes, and one disagreement "
        "between `annotator` and `annotator-2` waiting for the manager's review. Plays the "
        "round first (demo_round) when it has no episodes. Does nothing when the job exists."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--unlabelled", type=int, default=12, help="episodes to leave for labelling"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        result = seed_label_demo(unlabelled=options["unlabelled"])
        if not result["created"]:
            self.stdout.write(f"The label job already exists: /label/jobs/{result['job']}/")
            return
        self.stdout.write(
            f"Label job {result['job']} for {result['dataset']}: {result['unlabelled']} episodes "
            f"to label, {result['gold']} gold, 1 disagreement to review "
            f"(/label/jobs/{result['job']}/review/). Sign in as annotator or manager (password demo)."
        )


def seed_label_demo(*, unlabelled: int = 12) -> dict[str, Any]:
    """Create the demo round's label job with work in every state; idempotent."""
    operator = Organization.objects.filter(slug="fieldcraft-ops").first()
    if operator is None:
        raise CommandError("No demo: run `manage.py seed_demo` first.")
    campaign = Campaign.objects.get(organization=operator, slug="northwind-2027-h1")
    round = campaign.rounds.get(number=1)
    if round.dataset is None or not Episode.objects.filter(dataset=round.dataset).exists():
        from frontend.demo import demo_round

        demo_round(write_dir=Path(settings.DATA_DIR) / "demo")
        round.refresh_from_db()
    dataset = round.dataset
    assert dataset is not None
    existing = LabelJob.objects.filter(dataset=dataset).first()
    if existing is not None:
        return {"created": False, "job": existing.pk}
    users = get_user_model().objects
    manager = users.get(username="manager")
    first, second = users.get(username="annotator"), users.get(username="annotator-2")
    dims = list(
        ConditionDimension.objects.filter(organization=operator, stageable=True).values_list(
            "slug", flat=True
        )
    )
    with transaction.atomic():
        ids = list(
            Episode.objects.filter(dataset=dataset, episode_count=1)
            .order_by("id")
            .values_list("pk", flat=True)[: unlabelled + 3]
        )
        # Episodes arrive from the field unlabelled; the demo round labelled them all at once.
        Episode.objects.filter(pk__in=ids).update(label_status=Episode.LabelStatus.UNLABELLED)
        job = label_job_create(
            dataset=dataset,
            actor=manager,
            overlap_share=0.25,
            gold_share=0.1,
            dimensions=dims,
            instructions="Check each condition the protocol set up; correct what was really there.",
        )
        schema = label_schema(job=job)
        gold_ids, disputed_id = ids[-2:], ids[-3]
        for episode in Episode.objects.filter(pk__in=gold_ids).select_related("condition_set"):
            gold_label_set(
                episode=episode,
                actor=manager,
                value_ids=list(schema.by_dimension(episode.condition_set.value_ids).values())
                if episode.condition_set
                else [],
                outcome=episode.outcome,
                failure_mode_id=episode.failure_mode_id,
            )
        _disagreement(
            job,
            Episode.objects.select_related("condition_set").get(pk=disputed_id),
            schema,
            first,
            second,
        )
    refresh_statistics()
    return {
        "created": True,
        "job": job.pk,
        "dataset": dataset.name,
        "unlabelled": len(ids) - 3,
        "gold": len(gold_ids),
    }


def _disagreement(job: LabelJob, episode: Episode, schema: Any, first: Any, second: Any) -> None:
    """Two annotators answer one episode differently on lighting; it waits for review."""
    item = LabelItem.objects.get(job=job, episode=episode)
    LabelItem.objects.filter(pk=item.pk).update(required=2)
    intended = schema.by_dimension(episode.condition_set.value_ids if episode.condition_set else [])
    lighting = next(d for d in schema.dimensions if d.slug == "lighting")
    other = next(v.id for v in lighting.values if v.id != intended.get(lighting.id))
    now = timezone.now()
    for user, light in ((first, intended.get(lighting.id)), (second, other)):
        LabelItem.objects.filter(pk=item.pk).update(claims=F("claims") + 1)
        assignment = LabelAssignment.objects.create(
            job=job,
            item=item,
            episode=episode,
            annotator=user,
            assigned_at=now,
            expires_at=now + timedelta(minutes=job.claim_minutes),
        )
        values = {**intended, lighting.id: light}
        annotation_submit(
            assignment=assignment,
            actor=user,
            value_ids=[v for v in values.values() if v],
            outcome=episode.outcome,
            failure_mode_id=episode.failure_mode_id,
            notes="The lamps looked off to me." if user is second else "",
            seconds_spent=9.0,
        )
