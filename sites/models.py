"""The world a policy is deployed into: embodiments, sites, deployments, the condition and
failure taxonomies, and what production has observed.

Condition values are *interned*: every distinct combination of condition values that an
episode, a production log line, an evaluation result or a capture target refers to is stored
once as a :class:`ConditionSet` (a sorted ``integer[]`` of value ids, unique per
organization), and those rows point at it with one integer foreign key. Why: the training
inventory runs to millions of episodes but only thousands of distinct combinations, so
"episodes per condition cell" is ``GROUP BY condition_set_id`` over one narrow integer column
(an index-only scan), and projecting onto any chosen subset of dimensions happens on the few
thousand ConditionSet rows instead of the millions of episodes. A JSONB column per episode
would need per-key extraction on every row; one column per dimension would need DDL for
every new dimension. A dimension missing from a set means "not recorded" for that dimension.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import time
from typing import ClassVar

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from accounts.models import Organization, TenantQuerySet


class OrgQuerySet(TenantQuerySet):
    operator_path = "organization"


class CustomerQuerySet(TenantQuerySet):
    operator_path = "organization"
    customer_path = "customer"


class ActionSource(models.TextChoices):
    STREAM = "stream", "The recorded action stream"
    NEXT_STATE = "next_state", "The next frame's state (no action stream recorded)"


class GapPolicy(models.TextChoices):
    SPLIT = "split", "Split the episode at the gap"
    MARK = "mark", "Keep the episode, marked out of sync with the rows listed"
    EXCLUDE = "exclude", "Leave the episode out"


class Embodiment(models.Model):
    """A robot platform: morphology, end effector, action space, control rate, camera rig."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    morphology = models.CharField(max_length=100, help_text="e.g. mobile manipulator, fixed arm")
    end_effector = models.CharField(max_length=100, help_text="e.g. parallel gripper, suction")
    control_rate_hz = models.FloatField(validators=[MinValueValidator(0.1)])
    calibration_threshold = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of each action dimension's range a calibration episode must exercise.",
    )
    robot_type = models.CharField(
        max_length=100, blank=True, help_text="LeRobot robot_type this embodiment matches."
    )
    description = models.TextField(blank=True)
    # Which recorded streams are this robot's state, action and cameras (see
    # labeling.capture.streams for the conventions used when a topic is left blank).
    state_topic = models.CharField(
        max_length=300,
        blank=True,
        help_text="Topic of the joint state (sensor_msgs/msg/JointState). Blank: the JointState "
        "topic named like joint_states.",
    )
    action_topic = models.CharField(
        max_length=300,
        blank=True,
        help_text="Topic of the commanded action. Blank: the joint topic named like "
        "command or action.",
    )
    action_source = models.CharField(
        max_length=16,
        choices=ActionSource.choices,
        default=ActionSource.STREAM,
        help_text="Where a dataset's action comes from when converting recordings.",
    )
    dataset_fps = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text="Frame rate of converted datasets. Blank: the fastest camera's.",
    )
    gap_policy = models.CharField(
        max_length=16,
        choices=GapPolicy.choices,
        default=GapPolicy.SPLIT,
        help_text="What conversion does where a stream has no sample within tolerance.",
    )

    objects = OrgQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="embodiment_slug_unique"),
            models.CheckConstraint(
                name="embodiment_dataset_fps_positive",
                condition=Q(dataset_fps__isnull=True) | Q(dataset_fps__gt=0),
            ),
            models.CheckConstraint(
                name="embodiment_rate_positive", condition=Q(control_rate_hz__gt=0)
            ),
            models.CheckConstraint(
                name="embodiment_calibration_threshold_range",
                condition=Q(calibration_threshold__gte=0) & Q(calibration_threshold__lte=1),
            ),
        ]

    def __str__(self) -> str:
        return self.name


class EmbodimentChildQuerySet(TenantQuerySet):
    operator_path = "embodiment__organization"


class ActionDimension(models.Model):
    embodiment = models.ForeignKey(
        Embodiment, on_delete=models.CASCADE, related_name="action_dimensions"
    )
    order = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=100)
    unit = models.CharField(max_length=32, help_text="rad, m, m/s, 0-1 ...")
    min_value = models.FloatField()
    max_value = models.FloatField()

    objects = EmbodimentChildQuerySet.as_manager()

    class Meta:
        ordering = ["embodiment", "order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["embodiment", "name"], name="action_dimension_unique"),
            models.CheckConstraint(
                name="action_dimension_range_valid", condition=Q(max_value__gt=F("min_value"))
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} [{self.min_value}, {self.max_value}] {self.unit}"


class Camera(models.Model):
    embodiment = models.ForeignKey(Embodiment, on_delete=models.CASCADE, related_name="cameras")
    name = models.CharField(max_length=100)
    mount = models.CharField(max_length=100, help_text="e.g. wrist, head, fixed overhead")
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    fps = models.FloatField(validators=[MinValueValidator(0.1)])
    topic = models.CharField(
        max_length=300,
        blank=True,
        help_text="Topic of this camera's images. Blank: the image topic containing the name.",
    )
    clock_offset_ms = models.FloatField(
        default=0.0,
        help_text="From calibration: how far this camera's clock runs ahead of the robot's "
        "(capture time = header stamp − offset).",
    )

    objects = EmbodimentChildQuerySet.as_manager()

    class Meta:
        ordering = ["embodiment", "name"]
        constraints = [
            models.UniqueConstraint(fields=["embodiment", "name"], name="camera_unique"),
            models.CheckConstraint(name="camera_fps_positive", condition=Q(fps__gt=0)),
            models.CheckConstraint(
                name="camera_size_positive", condition=Q(width__gt=0) & Q(height__gt=0)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.mount}, {self.width}x{self.height}@{self.fps:g})"


class Task(models.Model):
    """What the robot does, e.g. "pick totes from a rack"; LeRobot task strings map here."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=500)
    description = models.TextField(blank=True)

    objects = OrgQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="task_slug_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class ConditionDimension(models.Model):
    class Kind(models.TextChoices):
        CATEGORICAL = "categorical", "Categorical"
        ORDINAL = "ordinal", "Ordinal"
        BINNED = "binned", "Binned continuous"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CATEGORICAL)
    unit = models.CharField(max_length=32, blank=True, help_text="For binned continuous values.")
    stageable = models.BooleanField(
        default=False,
        help_text="Whether a field team can set this condition up at any site (lighting with "
        "lamps, clutter by arranging, camera pose by mounting). Geography and floor cannot.",
    )
    order = models.PositiveIntegerField(default=0)
    description = models.TextField(blank=True)

    objects = OrgQuerySet.as_manager()

    class Meta:
        ordering = ["order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="dimension_slug_unique"),
            models.CheckConstraint(
                name="dimension_kind_valid",
                condition=Q(kind__in=["categorical", "ordinal", "binned"]),
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ConditionValueQuerySet(TenantQuerySet):
    operator_path = "dimension__organization"


class ConditionValue(models.Model):
    dimension = models.ForeignKey(
        ConditionDimension, on_delete=models.CASCADE, related_name="values"
    )
    slug = models.SlugField(max_length=64)
    label = models.CharField(max_length=100)
    order = models.PositiveIntegerField(default=0, help_text="Rank for ordinal dimensions.")
    low = models.FloatField(null=True, blank=True, help_text="Bin lower bound (binned).")
    high = models.FloatField(null=True, blank=True, help_text="Bin upper bound (binned).")
    stageable = models.BooleanField(
        null=True,
        blank=True,
        help_text="Overrides the dimension's stageability for this value (blank: inherit).",
    )
    setup_instruction = models.CharField(
        max_length=300,
        blank=True,
        help_text='What a field team does to present this value, e.g. "Dim the aisle lights '
        "to the 'dim sodium' level\".",
    )

    objects = ConditionValueQuerySet.as_manager()

    class Meta:
        ordering = ["dimension__order", "dimension__name", "order", "label"]
        constraints = [
            models.UniqueConstraint(fields=["dimension", "slug"], name="condition_value_unique"),
            models.CheckConstraint(
                name="condition_value_bin_ordered",
                condition=Q(low__isnull=True) | Q(high__isnull=True) | Q(high__gt=F("low")),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dimension.name}: {self.label}"

    @property
    def is_stageable(self) -> bool:
        if self.stageable is not None:
            return self.stageable
        return self.dimension.stageable


class ConditionSet(models.Model):
    """One interned combination of condition values (see the module docstring)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    value_ids = ArrayField(models.IntegerField(), help_text="Sorted ConditionValue ids.")

    objects = OrgQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "value_ids"], name="condition_set_unique"
            ),
        ]
        indexes = [GinIndex(fields=["value_ids"], name="condition_set_values_gin")]

    def __str__(self) -> str:
        return "{" + ", ".join(str(v) for v in self.value_ids) + "}"

    @staticmethod
    def key_for(value_ids: Iterable[int]) -> list[int]:
        return sorted({int(v) for v in value_ids})


class Site(models.Model):
    class Kind(models.TextChoices):
        DEPLOYMENT = "deployment", "Deployment site"
        COLLECTION = "collection", "Collection partner"
        LAB = "lab", "Lab"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    customer = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="customer_sites",
        help_text="The customer that owns this deployment site; blank for partner and lab sites.",
    )
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.DEPLOYMENT)
    address = models.CharField(max_length=300, blank=True)
    country = models.CharField(max_length=2, help_text="ISO 3166-1 alpha-2")
    region = models.CharField(max_length=100, blank=True)
    latitude = models.FloatField(validators=[MinValueValidator(-90), MaxValueValidator(90)])
    longitude = models.FloatField(validators=[MinValueValidator(-180), MaxValueValidator(180)])
    timezone = models.CharField(max_length=64, help_text="IANA time zone, e.g. Europe/Amsterdam")
    capacity_episodes_per_day = models.PositiveIntegerField(
        default=200,
        help_text="Episodes the site takes in one day: all teams and rounds together.",
    )
    episode_minutes = models.FloatField(
        default=2.0, help_text="Average minutes per episode including reset."
    )
    setup_hours = models.FloatField(default=1.0, help_text="Setup time per visit.")
    cost_per_hour = models.DecimalField(
        max_digits=10, decimal_places=2, default=0, help_text="Site fee per field hour."
    )
    presents = models.ManyToManyField(
        ConditionValue,
        blank=True,
        related_name="sites",
        help_text="Condition values this site presents naturally (its surveyed profile).",
    )

    objects = CustomerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="site_slug_unique"),
            models.CheckConstraint(
                name="site_latitude_range", condition=Q(latitude__gte=-90) & Q(latitude__lte=90)
            ),
            models.CheckConstraint(
                name="site_longitude_range",
                condition=Q(longitude__gte=-180) & Q(longitude__lte=180),
            ),
            models.CheckConstraint(
                name="site_episode_minutes_positive", condition=Q(episode_minutes__gt=0)
            ),
            models.CheckConstraint(
                name="site_setup_hours_nonnegative", condition=Q(setup_hours__gte=0)
            ),
            models.CheckConstraint(name="site_cost_nonnegative", condition=Q(cost_per_hour__gte=0)),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        from django.core.exceptions import ValidationError

        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValidationError(
                {"timezone": f"Unknown IANA time zone {self.timezone!r}."}
            ) from exc


class SiteChildQuerySet(TenantQuerySet):
    operator_path = "site__organization"
    customer_path = "site__customer"


class AccessWindow(models.Model):
    """A weekly window (local site time) during which a team may work at a site."""

    WEEKDAYS: ClassVar[list[tuple[int, str]]] = [
        (0, "Monday"),
        (1, "Tuesday"),
        (2, "Wednesday"),
        (3, "Thursday"),
        (4, "Friday"),
        (5, "Saturday"),
        (6, "Sunday"),
    ]

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="access_windows")
    weekday = models.PositiveSmallIntegerField(choices=WEEKDAYS)
    start_time = models.TimeField(default=time(8, 0))
    end_time = models.TimeField(default=time(17, 0))

    objects = SiteChildQuerySet.as_manager()

    class Meta:
        ordering = ["site", "weekday", "start_time"]
        constraints = [
            models.CheckConstraint(name="access_window_weekday_range", condition=Q(weekday__lte=6)),
            models.CheckConstraint(
                name="access_window_ordered", condition=Q(end_time__gt=F("start_time"))
            ),
            models.UniqueConstraint(
                fields=["site", "weekday", "start_time"], name="access_window_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_weekday_display()} {self.start_time:%H:%M}–{self.end_time:%H:%M}"


class Deployment(models.Model):
    """An embodiment doing a task at a site for a customer, with its reliability target."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    customer = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="customer_deployments"
    )
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="deployments")
    embodiment = models.ForeignKey(Embodiment, on_delete=models.PROTECT, related_name="deployments")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="deployments")
    cycles_per_day = models.PositiveIntegerField()
    reliability_target = models.FloatField(
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Target success rate per cycle, e.g. 0.999.",
    )
    started_on = models.DateField(null=True, blank=True)
    active = models.BooleanField(default=True)

    objects = CustomerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="deployment_slug_unique"),
            models.CheckConstraint(
                name="deployment_target_range",
                condition=Q(reliability_target__gt=0) & Q(reliability_target__lt=1),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def target_interventions_per_day(self) -> float:
        return self.cycles_per_day * (1.0 - self.reliability_target)


class DeploymentChildQuerySet(TenantQuerySet):
    operator_path = "deployment__organization"
    customer_path = "deployment__customer"


class FailureRecordQuerySet(TenantQuerySet):
    operator_path = "organization"
    customer_path = "deployment__customer"


class ConditionShare(models.Model):
    """The surveyed share of a deployment's cycles under one condition value (a marginal)."""

    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="condition_profile"
    )
    value = models.ForeignKey(ConditionValue, on_delete=models.PROTECT, related_name="+")
    share = models.FloatField(validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])

    objects = DeploymentChildQuerySet.as_manager()

    class Meta:
        ordering = ["deployment", "value__dimension__order", "value__order"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "value"], name="condition_share_unique"),
            models.CheckConstraint(
                name="condition_share_range", condition=Q(share__gte=0) & Q(share__lte=1)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.value}: {self.share:.1%}"


class ProductionLog(models.Model):
    """Production cycles of a deployment on one (site-local) day under one condition set and
    policy version: the fleet's cycle events, counted on arrival (see ProductionEvent)."""

    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="production_logs"
    )
    condition_set = models.ForeignKey(ConditionSet, on_delete=models.PROTECT, related_name="+")
    day = models.DateField()
    # The policy version's slug ('' when the fleet did not say): a slug, not a key, because
    # policy versions live in ``analytics``, above this app.
    policy = models.SlugField(max_length=64, blank=True, default="")
    cycles = models.PositiveIntegerField()
    failures = models.PositiveIntegerField(default=0)
    # Sum and count of the cycles that carried a duration (their mean is the cycle time).
    duration_seconds = models.FloatField(default=0.0)
    timed_cycles = models.PositiveIntegerField(default=0)

    objects = DeploymentChildQuerySet.as_manager()

    class Meta:
        ordering = ["deployment", "day"]
        indexes = [models.Index(fields=["deployment", "day"], name="production_log_day_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "condition_set", "day", "policy"],
                name="production_log_unique",
            ),
            models.CheckConstraint(
                name="production_log_failures_le_cycles", condition=Q(failures__lte=F("cycles"))
            ),
            models.CheckConstraint(
                name="production_log_timed_le_cycles", condition=Q(timed_cycles__lte=F("cycles"))
            ),
            models.CheckConstraint(
                name="production_log_duration_nonnegative", condition=Q(duration_seconds__gte=0)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment} {self.day}: {self.cycles} cycles"


class ConditionSample(models.Model):
    """A measurement of continuous conditions at a deployment (a lux reading, a camera offset).

    These are the target side of the domain-classifier check: training episodes carry the
    same measurements in ``Episode.features``.
    """

    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="condition_samples"
    )
    measured_at = models.DateTimeField()
    features = models.JSONField(help_text='e.g. {"light_lux": 85.0, "camera_offset_cm": 4.2}')

    objects = DeploymentChildQuerySet.as_manager()

    class Meta:
        ordering = ["deployment", "measured_at"]
        indexes = [models.Index(fields=["deployment", "measured_at"])]

    def __str__(self) -> str:
        return f"{self.deployment} {self.measured_at:%Y-%m-%d %H:%M}"


class FailureMode(models.Model):
    """A node of the hierarchical failure taxonomy, FMEA-style."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    code = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    severity = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1), MaxValueValidator(10)]
    )
    detectability = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="FMEA detection rating: 1 = always detected, 10 = undetectable.",
    )
    description = models.TextField(blank=True)

    objects = OrgQuerySet.as_manager()

    class Meta:
        ordering = ["code"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "code"], name="failure_mode_code_unique"
            ),
            models.CheckConstraint(
                name="failure_mode_severity_range",
                condition=Q(severity__gte=1) & Q(severity__lte=10),
            ),
            models.CheckConstraint(
                name="failure_mode_detectability_range",
                condition=Q(detectability__gte=1) & Q(detectability__lte=10),
            ),
            models.CheckConstraint(
                name="failure_mode_not_own_parent", condition=~Q(parent=F("id"))
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def level(self) -> int:
        return self.code.count(".") + 1


class Intervener(models.TextChoices):
    HARNESS = "harness", "The classical harness"
    PERSON = "person", "A person"


class FailureRecord(models.Model):
    """An observed failure or intervention at a deployment, with its conditions."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="failure_records"
    )
    failure_mode = models.ForeignKey(FailureMode, on_delete=models.PROTECT, related_name="records")
    condition_set = models.ForeignKey(
        ConditionSet, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    occurred_at = models.DateTimeField()
    intervention = models.BooleanField(default=True, help_text="A human had to step in.")
    intervened_by = models.CharField(
        max_length=12,
        choices=Intervener.choices,
        default=Intervener.PERSON,
        help_text="Who or what stepped in: the classical harness or a person.",
    )
    policy = models.SlugField(
        max_length=64, blank=True, default="", help_text="The policy version's slug, if said."
    )
    recording_ref = models.CharField(
        max_length=500,
        blank=True,
        help_text="Where the robot's recording of it is (a URI or an upload id), if any.",
    )
    external_id = models.CharField(max_length=100, blank=True)
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = FailureRecordQuerySet.as_manager()

    class Meta:
        ordering = ["-occurred_at"]
        indexes = [models.Index(fields=["deployment", "occurred_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "external_id"],
                condition=~Q(external_id=""),
                name="failure_record_external_id_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.failure_mode} at {self.deployment} ({self.occurred_at:%Y-%m-%d})"


class ProductionEvent(models.Model):
    """One production event as the fleet sent it: the ledger that makes ingest idempotent.

    Cycles are counted into :class:`ProductionLog` on arrival and interventions kept as
    :class:`FailureRecord`; the ledger keeps each event's id and what it counted (a replay of
    the same event gets the original answer, another event under the same id is a conflict),
    so a retraction or correction takes exactly that back out.
    """

    class Kind(models.TextChoices):
        CYCLE = "cycle", "Production cycle"
        INTERVENTION = "intervention", "Intervention"

    # Keyed by (deployment, event id), and without database-level foreign keys: the ingest
    # resolves every id it writes in its own transaction, and a fleet writes millions of rows a
    # day, each of which would otherwise queue a check per reference (see writes.py).
    pk = models.CompositePrimaryKey("deployment", "event_id")
    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    # Compared byte by byte ("C"): an id is the client's opaque token, and the key's index
    # then never asks the locale to order text (a sixth of the ledger's insert time).
    event_id = models.CharField(max_length=100, db_collation="C")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    occurred_at = models.DateTimeField()
    day = models.DateField(help_text="The site-local day the event counts on.")
    condition_set = models.ForeignKey(
        ConditionSet,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    policy = models.SlugField(max_length=64, blank=True, default="", db_index=False)
    failed = models.BooleanField(default=False)
    duration_seconds = models.FloatField(null=True, blank=True)
    # An intervention's own fields, kept so that a replay is recognised after a retraction.
    failure_mode = models.ForeignKey(
        FailureMode,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    intervened_by = models.CharField(max_length=12, blank=True, db_default="")
    note = models.TextField(blank=True, db_default="")
    recording = models.CharField(max_length=500, blank=True, db_default="")
    failure_record = models.ForeignKey(
        FailureRecord,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    retracted = models.BooleanField(db_default=False)
    received_at = models.DateTimeField(db_default=models.functions.Now())

    objects = DeploymentChildQuerySet.as_manager()

    class Meta:
        ordering = ["deployment", "occurred_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["failure_record"],
                condition=Q(failure_record__isnull=False),
                name="production_event_record_unique",
            ),
            models.CheckConstraint(
                name="production_event_duration_nonnegative",
                condition=Q(duration_seconds__isnull=True) | Q(duration_seconds__gte=0),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment} {self.kind} {self.event_id}"
