"""factory_boy factories and a small complete world per organization."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, time
from typing import Any

import factory
from django.contrib.auth import get_user_model

from accounts.models import Job, Membership, Organization, Role
from analytics.models import (
    DashboardShare,
    EvaluationResult,
    EvaluationRun,
    GapReport,
    PolicyVersion,
    RoundImpactReport,
)
from campaigns.models import (
    Campaign,
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    FieldTeam,
    TaskTarget,
)
from campaigns.services import round_create
from labeling.models import Dataset, Episode, InventoryImport
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    Site,
    Task,
)
from sites.services import condition_set_intern


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    slug = factory.Sequence(lambda n: f"org-{n}")
    name = factory.Sequence(lambda n: f"Organization {n}")
    kind = Organization.Kind.OPERATOR


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw")


def member(org: Organization, role: str, username: str | None = None, **extra: Any) -> Any:
    user = UserFactory(username=username or f"{org.slug}-{role}", **extra)
    user.save()
    Membership.objects.create(user=user, organization=org, role=role)
    return user


class EmbodimentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Embodiment

    slug = factory.Sequence(lambda n: f"emb-{n}")
    name = factory.Sequence(lambda n: f"Robot {n}")
    morphology = "fixed arm"
    end_effector = "parallel gripper"
    control_rate_hz = 50


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Site

    slug = factory.Sequence(lambda n: f"site-{n}")
    name = factory.Sequence(lambda n: f"Site {n}")
    country = "NL"
    latitude = 51.9
    longitude = 4.4
    timezone = "Europe/Amsterdam"


@dataclass
class World:
    """One operator with a customer, and one of everything the domain holds."""

    operator: Organization
    customer: Organization
    manager: Any
    field: Any
    annotator: Any
    viewer: Any
    embodiment: Embodiment
    task: Task
    site: Site
    deployment: Deployment
    dimension: ConditionDimension
    values: list[ConditionValue]
    failure_mode: FailureMode
    failure_record: FailureRecord
    dataset: Dataset
    episode: Episode
    campaign: Campaign
    round: CollectionRound
    team: FieldTeam
    collection_task: CollectionTask
    policy: PolicyVersion
    evaluation: EvaluationRun
    job: Job
    gap_report: GapReport
    target: CaptureTarget
    share: DashboardShare
    impact: RoundImpactReport
    inventory_import: InventoryImport

    def objects(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if hasattr(v, "pk")}


def build_world(tag: str) -> World:
    operator = Organization.objects.create(
        slug=f"ops-{tag}", name=f"Operator {tag.upper()}", kind="operator"
    )
    customer = Organization.objects.create(
        slug=f"cust-{tag}", name=f"Customer {tag.upper()}", kind="customer", operator=operator
    )
    manager = member(operator, Role.MANAGER, f"manager-{tag}", is_staff=True)
    field = member(operator, Role.FIELD, f"field-{tag}")
    annotator = member(operator, Role.ANNOTATOR, f"annotator-{tag}")
    viewer = member(customer, Role.VIEWER, f"viewer-{tag}")
    embodiment = EmbodimentFactory(
        organization=operator, slug=f"emb-{tag}", name=f"Arm {tag.upper()}"
    )
    ActionDimension.objects.create(
        embodiment=embodiment, name="j1", unit="rad", min_value=-1, max_value=1
    )
    ActionDimension.objects.create(
        embodiment=embodiment, name="gripper", unit="m", min_value=0, max_value=0.08, order=1
    )
    Camera.objects.create(
        embodiment=embodiment, name="front", mount="head", width=640, height=480, fps=30
    )
    task = Task.objects.create(organization=operator, slug=f"pick-{tag}", name=f"Pick {tag}")
    site = SiteFactory(
        organization=operator,
        customer=customer,
        slug=f"site-{tag}",
        name=f"Warehouse {tag.upper()}",
    )
    AccessWindow.objects.create(site=site, weekday=0, start_time=time(8), end_time=time(16))
    dimension = ConditionDimension.objects.create(
        organization=operator, slug="lighting", name="Lighting", stageable=True
    )
    values = [
        ConditionValue.objects.create(dimension=dimension, slug="bright", label="Bright", order=0),
        ConditionValue.objects.create(dimension=dimension, slug="dim", label="Dim", order=1),
    ]
    site.presents.set(values)
    deployment = Deployment.objects.create(
        organization=operator,
        customer=customer,
        slug=f"dep-{tag}",
        name=f"Deployment {tag.upper()}",
        site=site,
        embodiment=embodiment,
        task=task,
        cycles_per_day=1000,
        reliability_target=0.999,
    )
    cs = condition_set_intern(organization=operator, value_ids=[values[1].pk])
    mode = FailureMode.objects.create(organization=operator, code="grasp", name="Grasp failure")
    record = FailureRecord.objects.create(
        organization=operator,
        deployment=deployment,
        failure_mode=mode,
        condition_set=cs,
        occurred_at="2026-10-01T10:00:00Z",
    )
    dataset = Dataset.objects.create(organization=operator, slug=f"ds-{tag}", name=f"Dataset {tag}")
    episode = Episode.objects.create(
        organization=operator,
        dataset=dataset,
        key="0",
        embodiment=embodiment,
        condition_set=cs,
        frames=100,
    )
    campaign = Campaign.objects.create(
        organization=operator,
        customer=customer,
        slug=f"camp-{tag}",
        name=f"Campaign {tag.upper()}",
        task=task,
        reliability_goal=0.999,
        start_date=date(2026, 11, 1),
        end_date=date(2027, 3, 1),
    )
    campaign.embodiments.set([embodiment])
    campaign.deployments.set([deployment])
    round = round_create(campaign=campaign)
    team = FieldTeam.objects.create(
        organization=operator,
        slug=f"team-{tag}",
        name=f"Team {tag.upper()}",
        home_base="Base",
        home_latitude=51.5,
        home_longitude=4.7,
    )
    team.members.set([field])
    team.embodiments.set([embodiment])
    collection_task = CollectionTask.objects.create(
        round=round,
        site=site,
        embodiment=embodiment,
        team=team,
        scheduled_date=date(2026, 12, 1),
        status=CollectionTask.Status.PUBLISHED,
    )
    policy = PolicyVersion.objects.create(
        organization=operator, slug=f"pol-{tag}", name=f"Policy {tag}", embodiment=embodiment
    )
    evaluation = EvaluationRun.objects.create(
        organization=operator,
        policy_version=policy,
        deployment=deployment,
        label="eval",
        evaluated_on=date(2026, 10, 1),
    )
    EvaluationResult.objects.create(run=evaluation, condition_set=cs, trials=100, successes=97)
    job = Job.objects.create(
        organization=operator, kind="import", title=f"Import {tag}", status="succeeded"
    )
    from analytics.services.gap import gap_report_build

    gap_report = gap_report_build(
        report=GapReport.objects.create(organization=operator, campaign=campaign)
    )
    target = CaptureTarget.objects.create(
        round=round, condition_set=cs, label=f"Dim lighting {tag}", episodes_wanted=40, priority=1.0
    )
    TaskTarget.objects.create(task=collection_task, target=target, episodes_planned=40)
    inventory_import = InventoryImport.objects.create(
        organization=operator,
        dataset_name=dataset.name,
        dataset=dataset,
        source_path=f"/nonexistent/{tag}.csv",
        source_name=f"manifest-{tag}.csv",
        format="csv",
        job=Job.objects.create(
            organization=operator, kind="import", title=f"Import {tag}.csv", status="succeeded"
        ),
        summary={"episodes": 1, "frames": 100, "rows": 1},
    )
    from datetime import timedelta

    from django.utils import timezone

    share = DashboardShare.objects.create(
        organization=operator,
        customer=customer,
        token=f"share-token-{tag}-" + "x" * 24,
        expires_at=timezone.now() + timedelta(days=7),
    )
    impact = RoundImpactReport.objects.create(
        round=round,
        before_policy=policy,
        after_policy=policy,
        summary={"sentences": [f"Impact {tag}"]},
    )
    failure_mode = mode
    failure_record = record
    fields = {f.name for f in dataclasses.fields(World)}
    return World(**{name: value for name, value in locals().items() if name in fields})
