"""factory_boy factories and a small complete world per organization."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date, time, timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

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
from labeling.models import (
    Annotation,
    Dataset,
    DatasetExport,
    Episode,
    GoldLabel,
    InventoryImport,
    LabelAssignment,
    LabelItem,
    LabelJob,
    Recording,
    RecordingUpload,
    Review,
)
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
    recording: Recording
    recording_upload: RecordingUpload
    inventory_import: InventoryImport
    label_job: LabelJob
    label_assignment: LabelAssignment
    annotation: Annotation
    gold_label: GoldLabel
    review: Review
    dataset_export: DatasetExport

    def objects(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if hasattr(v, "pk")}


def another_deployment(world: World, slug: str, **fields: Any) -> Deployment:
    """A second deployment of ``world``'s operator, customer, site, embodiment and task (in
    no campaign); ``fields`` override the name, cycles a day, target and the rest."""
    values: dict[str, Any] = {
        "organization": world.operator,
        "customer": world.customer,
        "slug": slug,
        "name": slug.replace("-", " ").capitalize(),
        "site": world.site,
        "embodiment": world.embodiment,
        "task": world.task,
        "cycles_per_day": 1000,
        "reliability_target": 0.999,
    }
    return Deployment.objects.create(**{**values, **fields})


def build_world(tag: str) -> World:
    today = timezone.localdate()
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
        # Around today, so the world's campaign is current whatever day the suite runs.
        start_date=today - timedelta(days=30),
        end_date=today + timedelta(days=120),
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
        scheduled_date=today,
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
    label_job, label_assignment, annotation, gold_label, review, dataset_export = _label_world(
        tag, operator, manager, annotator, dataset, episode, values
    )
    recording = Recording.objects.create(
        organization=operator,
        sha256=f"{tag:0<64}"[:64],
        size=10,
        original_name=f"rec-{tag}.mcap",
        storage_path="/nonexistent",
        embodiment=embodiment,
    )
    recording_upload = RecordingUpload.objects.create(
        organization=operator,
        filename=f"up-{tag}.mcap",
        size=10,
        sha256="b" * 64,
        path="/nonexistent",
        created_by=field,
        context={"task_id": collection_task.pk},
    )
    fields = {f.name for f in dataclasses.fields(World)}
    return World(**{name: value for name, value in locals().items() if name in fields})


# A 1×1 PNG: the world's episode has stored media, served through the app.
WORLD_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082"
)


def _write_once(path: Any, content: bytes) -> None:
    """Write a small file under MEDIA_ROOT unless it is already there (worlds are rebuilt
    for every test; the files are the same each time)."""
    from pathlib import Path

    target = Path(path)
    if target.is_file() and target.read_bytes() == content:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{id(content)}")
    partial.write_bytes(content)
    partial.replace(target)


def _label_world(
    tag: str,
    operator: Organization,
    manager: Any,
    annotator: Any,
    dataset: Dataset,
    episode: Episode,
    values: list[ConditionValue],
) -> tuple[LabelJob, LabelAssignment, Annotation, GoldLabel, Review, DatasetExport]:
    """The dataset's label job with the episode labelled, made gold, reviewed and exported;
    the episode has a stored image and the export a zip file, both under MEDIA_ROOT."""
    import io
    import zipfile
    from datetime import timedelta
    from pathlib import Path

    from django.conf import settings
    from django.utils import timezone

    now = timezone.now()
    media = f"episode-media/world-{tag}.png"
    _write_once(Path(settings.MEDIA_ROOT) / media, WORLD_PNG)
    Episode.objects.filter(pk=episode.pk).update(
        extra={"media": [media]}, sync_status="synced", label_status="accepted"
    )
    episode.refresh_from_db()
    label_job = LabelJob.objects.create(organization=operator, dataset=dataset, created_by=manager)
    item = LabelItem.objects.create(
        job=label_job, episode=episode, required=1, claims=1, is_gold=True
    )
    assignment = LabelAssignment.objects.create(
        job=label_job,
        item=item,
        episode=episode,
        annotator=annotator,
        status="done",
        assigned_at=now,
        expires_at=now + timedelta(minutes=30),
        finished_at=now,
    )
    annotation = Annotation.objects.create(
        assignment=assignment,
        episode=episode,
        annotator=annotator,
        value_ids=[values[1].pk],
        outcome="success",
        seconds_spent=4.0,
    )
    gold = GoldLabel.objects.create(
        organization=operator,
        episode=episode,
        value_ids=[values[1].pk],
        outcome="success",
        created_by=manager,
    )
    review = Review.objects.create(
        organization=operator,
        job=label_job,
        episode=episode,
        reviewer=manager,
        decision="accept",
        value_ids=[values[1].pk],
        outcome="success",
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        entry = zipfile.ZipInfo(f"{dataset.slug}-csv/{dataset.slug}.csv", (2026, 1, 1, 0, 0, 0))
        zf.writestr(entry, "key,frames\n0,100\n")
    archive = Path(settings.MEDIA_ROOT) / "exports" / f"world-{tag}" / f"{dataset.slug}-csv.zip"
    _write_once(archive, buffer.getvalue())
    export = DatasetExport.objects.create(
        organization=operator,
        dataset=dataset,
        format="csv",
        job=Job.objects.create(
            organization=operator, kind="export", title=f"Export {tag}", status="succeeded"
        ),
        path=str(archive),
        summary={"rows": 1, "episodes": 1, "frames": 100, "excluded": {"reasons": []}},
        created_by=manager,
    )
    return label_job, assignment, annotation, gold, review, export


def captured_dataset(
    world: World,
    n: int = 6,
    *,
    slug: str = "round-capture",
    sync_status: str = "synced",
    label_status: str = "unlabelled",
    intended: str = "dim",
) -> tuple[Dataset, list[Episode]]:
    """A round's capture dataset: ``n`` single episodes at the world's site, planned under
    ``intended`` lighting and low clutter (a second dimension the label tests keep or label)."""
    from datetime import UTC, datetime, timedelta

    clutter, _ = ConditionDimension.objects.get_or_create(
        organization=world.operator, slug="clutter", defaults={"name": "Clutter", "order": 1}
    )
    low, _ = ConditionValue.objects.get_or_create(
        dimension=clutter, slug="low", defaults={"label": "Low", "order": 0}
    )
    ConditionValue.objects.get_or_create(
        dimension=clutter, slug="high", defaults={"label": "High", "order": 1}
    )
    lighting = next(v for v in world.values if v.slug == intended)
    cs = condition_set_intern(organization=world.operator, value_ids=[lighting.pk, low.pk])
    dataset = Dataset.objects.create(
        organization=world.operator,
        slug=slug,
        name=f"Capture {slug}",
        source=Dataset.Source.CAPTURED,
        embodiment=world.embodiment,
        fps=30.0,
    )
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    episodes = [
        Episode.objects.create(
            organization=world.operator,
            dataset=dataset,
            key=f"cap-{i:03d}",
            embodiment=world.embodiment,
            site=world.site,
            task=world.task,
            condition_set=cs,
            frames=300 + i,
            duration_s=(300 + i) / 30.0,
            outcome="success",
            provenance="captured",
            sync_status=sync_status,
            label_status=label_status,
            validated=True,
            storage_uri=f"s3://bucket/{slug}/cap-{i:03d}.mcap",
            recorded_at=start + timedelta(minutes=5 * i),
            features={"light_lux": 80.0 + i},
        )
        for i in range(n)
    ]
    return dataset, episodes
