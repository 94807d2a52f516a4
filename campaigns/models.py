"""Campaigns, collection rounds, capture targets, field teams and collection tasks.

*Analytics decides, campaigns executes*: targets carry their rationale as text, but nothing
here knows how they were chosen. Each round captures into its own dataset.
"""

from __future__ import annotations

import secrets
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from accounts.models import Membership, Organization, Role, TenantQuerySet
from labeling.models import Dataset
from sites.models import ConditionSet, Deployment, Embodiment, FailureMode, Site, Task


class CampaignQuerySet(TenantQuerySet):
    operator_path = "organization"
    customer_path = "customer"

    def active(self) -> CampaignQuerySet:
        return self.filter(status=Campaign.Status.ACTIVE)


class Campaign(models.Model):
    """A programme for a customer: target deployments, reliability goal, budget, dates."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        CLOSED = "closed", "Closed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    customer = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="customer_campaigns"
    )
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="campaigns")
    embodiments = models.ManyToManyField(Embodiment, related_name="campaigns")
    deployments = models.ManyToManyField(Deployment, related_name="campaigns")
    reliability_goal = models.FloatField(
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    budget_episodes = models.PositiveIntegerField(null=True, blank=True)
    budget_hours = models.FloatField(null=True, blank=True)
    budget_money = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    start_date = models.DateField()
    end_date = models.DateField()
    transfer_weight = models.FloatField(
        default=0.3,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="How much an episode from another embodiment counts as coverage (0–1).",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = CampaignQuerySet.as_manager()

    class Meta:
        ordering = ["-start_date", "name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="campaign_slug_unique"),
            models.CheckConstraint(
                name="campaign_dates_ordered", condition=Q(end_date__gte=F("start_date"))
            ),
            models.CheckConstraint(
                name="campaign_goal_range",
                condition=Q(reliability_goal__gt=0) & Q(reliability_goal__lt=1),
            ),
            models.CheckConstraint(
                name="campaign_transfer_weight_range",
                condition=Q(transfer_weight__gte=0) & Q(transfer_weight__lte=1),
            ),
            models.CheckConstraint(
                name="campaign_budget_hours_nonnegative",
                condition=Q(budget_hours__isnull=True) | Q(budget_hours__gte=0),
            ),
            models.CheckConstraint(
                name="campaign_budget_money_nonnegative",
                condition=Q(budget_money__isnull=True) | Q(budget_money__gte=0),
            ),
        ]

    def __str__(self) -> str:
        return self.name


# Statuses from publishing onwards (``round_publish`` moves planned → scheduled): the only
# rounds a customer may see. Draft and planned rounds are the operator's own work.
PUBLISHED_STATUSES: tuple[str, ...] = (
    "scheduled",
    "collecting",
    "labelling",
    "evaluated",
    "closed",
)


class PublishedToCustomers(TenantQuerySet):
    """Rows of a round that customers see only once the round is published.

    ``round_status_path`` is the lookup from the row to its round's status.
    """

    round_status_path: ClassVar[str] = "round__status"

    def _visible_to_customer_member(self, membership: Membership) -> TenantQuerySet:
        return (
            super()
            ._visible_to_customer_member(membership)
            .filter(**{f"{self.round_status_path}__in": PUBLISHED_STATUSES})
        )


class RoundQuerySet(PublishedToCustomers):
    operator_path = "campaign__organization"
    customer_path = "campaign__customer"
    round_status_path = "status"

    def published(self) -> RoundQuerySet:
        """Rounds whose plan has been published to the field teams, or that went further."""
        return self.filter(status__in=PUBLISHED_STATUSES)


class CollectionRound(models.Model):
    """One steering iteration. Its status changes only through ``round_transition``."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PLANNED = "planned", "Planned"
        SCHEDULED = "scheduled", "Scheduled"
        COLLECTING = "collecting", "Collecting"
        LABELLING = "labelling", "Labelling"
        EVALUATED = "evaluated", "Evaluated"
        CLOSED = "closed", "Closed"

    # The one table of allowed moves. Forward along the loop; back one step only while
    # nothing has been collected yet (re-plan a planned round, un-publish a schedule).
    TRANSITIONS: ClassVar[dict[str, frozenset[str]]] = {
        "draft": frozenset({"planned"}),
        "planned": frozenset({"scheduled", "draft"}),
        "scheduled": frozenset({"collecting", "planned"}),
        "collecting": frozenset({"labelling"}),
        "labelling": frozenset({"evaluated"}),
        "evaluated": frozenset({"closed"}),
        "closed": frozenset(),
    }

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    dataset = models.OneToOneField(
        Dataset,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="collection_round",
        help_text="The dataset this round captures into.",
    )
    budget_episodes = models.PositiveIntegerField(null=True, blank=True)
    budget_hours = models.FloatField(null=True, blank=True)
    budget_money = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    start_date = models.DateField(null=True, blank=True)
    days = models.PositiveIntegerField(default=14)
    plan_summary = models.JSONField(
        default=dict, blank=True, help_text="Expected effect and binding constraints of the plan."
    )
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)

    objects = RoundQuerySet.as_manager()

    class Meta:
        ordering = ["campaign", "number"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "number"], name="round_number_unique"),
            models.CheckConstraint(
                name="round_status_valid",
                condition=Q(
                    status__in=[
                        "draft",
                        "planned",
                        "scheduled",
                        "collecting",
                        "labelling",
                        "evaluated",
                        "closed",
                    ]
                ),
            ),
            models.CheckConstraint(name="round_number_positive", condition=Q(number__gte=1)),
            models.CheckConstraint(
                name="round_budget_hours_nonnegative",
                condition=Q(budget_hours__isnull=True) | Q(budget_hours__gte=0),
            ),
            models.CheckConstraint(
                name="round_budget_money_nonnegative",
                condition=Q(budget_money__isnull=True) | Q(budget_money__gte=0),
            ),
            models.CheckConstraint(name="round_days_positive", condition=Q(days__gte=1)),
        ]

    def __str__(self) -> str:
        return f"{self.campaign} — round {self.number}"

    @classmethod
    def can_move(cls, from_status: str, to_status: str) -> bool:
        return to_status in cls.TRANSITIONS.get(from_status, frozenset())

    @property
    def is_editable(self) -> bool:
        return self.status in (self.Status.DRAFT, self.Status.PLANNED)


class TargetQuerySet(PublishedToCustomers):
    operator_path = "round__campaign__organization"
    customer_path = "round__campaign__customer"


class CaptureTarget(models.Model):
    """Episodes wanted in one condition cell (optionally provoking one failure mode)."""

    round = models.ForeignKey(CollectionRound, on_delete=models.CASCADE, related_name="targets")
    condition_set = models.ForeignKey(ConditionSet, on_delete=models.PROTECT, related_name="+")
    label = models.CharField(max_length=300, blank=True, help_text="Human label of the cell.")
    failure_mode = models.ForeignKey(
        FailureMode, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    episodes_wanted = models.PositiveIntegerField()
    priority = models.FloatField(default=0)
    expected_avoided_per_day = models.FloatField(default=0)
    rationale = models.TextField(blank=True)
    locked = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TargetQuerySet.as_manager()

    class Meta:
        ordering = ["round", "-priority", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["round", "condition_set", "failure_mode"],
                name="capture_target_unique",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label or self.condition_set}: {self.episodes_wanted} episodes"


def new_calendar_token() -> str:
    """Return an unguessable token for a team's calendar feed URL."""
    return secrets.token_urlsafe(32)


class TeamQuerySet(TenantQuerySet):
    operator_path = "organization"


class FieldTeam(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="field_teams"
    )
    embodiments = models.ManyToManyField(
        Embodiment, blank=True, related_name="teams", help_text="Embodiments it can operate."
    )
    home_base = models.CharField(max_length=200)
    home_latitude = models.FloatField(validators=[MinValueValidator(-90), MaxValueValidator(90)])
    home_longitude = models.FloatField(validators=[MinValueValidator(-180), MaxValueValidator(180)])
    home_timezone = models.CharField(max_length=64, default="UTC")
    hours_per_day = models.FloatField(
        default=8, validators=[MinValueValidator(0.5), MaxValueValidator(16)]
    )
    travel_speed_kmh = models.FloatField(default=70, validators=[MinValueValidator(1)])
    cost_per_hour = models.DecimalField(max_digits=10, decimal_places=2, default=0)
    calendar_token = models.CharField(
        max_length=64, unique=True, default=new_calendar_token, editable=False
    )

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="team_slug_unique"),
            models.CheckConstraint(
                name="team_hours_range", condition=Q(hours_per_day__gt=0) & Q(hours_per_day__lte=16)
            ),
            models.CheckConstraint(name="team_speed_positive", condition=Q(travel_speed_kmh__gt=0)),
            models.CheckConstraint(name="team_cost_nonnegative", condition=Q(cost_per_hour__gte=0)),
        ]

    def __str__(self) -> str:
        return self.name


class TeamChildQuerySet(TenantQuerySet):
    operator_path = "team__organization"


class TeamUnavailability(models.Model):
    team = models.ForeignKey(FieldTeam, on_delete=models.CASCADE, related_name="unavailability")
    start_date = models.DateField()
    end_date = models.DateField()
    reason = models.CharField(max_length=200, blank=True)

    objects = TeamChildQuerySet.as_manager()

    class Meta:
        ordering = ["team", "start_date"]
        constraints = [
            models.CheckConstraint(
                name="unavailability_dates_ordered", condition=Q(end_date__gte=F("start_date"))
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.start_date}–{self.end_date}"


class TaskQuerySet(PublishedToCustomers):
    operator_path = "round__campaign__organization"
    customer_path = "round__campaign__customer"

    def _visible_to_operator_member(self, membership: Membership) -> TaskQuerySet:
        qs = self.filter(**{self.operator_path: membership.organization_id})
        if membership.role == Role.FIELD:
            # Field members see only their own team's work.
            qs = qs.filter(team__members=membership.user_id)
        return qs


class CollectionTask(models.Model):
    """A visit of one team to one site to capture episodes for some of a round's targets."""

    class Status(models.TextChoices):
        PLANNED = "planned", "Planned"
        PUBLISHED = "published", "Published"
        IN_PROGRESS = "in_progress", "In progress"
        DONE = "done", "Done"
        BLOCKED = "blocked", "Blocked"
        CANCELLED = "cancelled", "Cancelled"

    round = models.ForeignKey(CollectionRound, on_delete=models.CASCADE, related_name="tasks")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="collection_tasks")
    embodiment = models.ForeignKey(Embodiment, on_delete=models.PROTECT, related_name="+")
    team = models.ForeignKey(
        FieldTeam, null=True, blank=True, on_delete=models.PROTECT, related_name="tasks"
    )
    targets = models.ManyToManyField(CaptureTarget, through="TaskTarget", related_name="tasks")
    scheduled_date = models.DateField(null=True, blank=True, help_text="Local date at the site.")
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    travel_hours = models.FloatField(default=0)
    travel_km = models.FloatField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PLANNED)
    locked = models.BooleanField(default=False)
    blocked_reason = models.CharField(max_length=300, blank=True)
    version = models.PositiveIntegerField(
        default=1, help_text="Bumped on every manager change; tablets detect conflicts with it."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["scheduled_date", "start_at", "id"]
        constraints = [
            models.CheckConstraint(
                name="task_times_ordered",
                condition=Q(start_at__isnull=True)
                | Q(end_at__isnull=True)
                | Q(end_at__gt=F("start_at")),
            ),
            models.CheckConstraint(
                name="task_travel_nonnegative", condition=Q(travel_hours__gte=0)
            ),
        ]
        indexes = [models.Index(fields=["team", "scheduled_date"])]

    def __str__(self) -> str:
        when = self.scheduled_date.isoformat() if self.scheduled_date else "unscheduled"
        return f"{self.site} {when}"

    @property
    def local_window(self) -> str:
        """The visit's times on the site's clock with the zone's abbreviation: 08:30–12:00 CET.

        One wording for every page and the tablet, so a team never has to convert; empty
        while the task has no times.
        """
        if self.start_at is None or self.end_at is None:
            return ""
        try:
            zone = ZoneInfo(self.site.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            zone = ZoneInfo("UTC")
        start, end = self.start_at.astimezone(zone), self.end_at.astimezone(zone)
        return f"{start:%H:%M}–{end:%H:%M} {start.tzname()}"


class TaskChildQuerySet(PublishedToCustomers):
    operator_path = "task__round__campaign__organization"
    customer_path = "task__round__campaign__customer"
    round_status_path = "task__round__status"


class TaskTarget(models.Model):
    task = models.ForeignKey(CollectionTask, on_delete=models.CASCADE, related_name="task_targets")
    target = models.ForeignKey(CaptureTarget, on_delete=models.CASCADE, related_name="task_targets")
    episodes_planned = models.PositiveIntegerField()

    objects = TaskChildQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "target"], name="task_target_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.target} × {self.episodes_planned}"


class ProtocolStep(models.Model):
    class Kind(models.TextChoices):
        SETUP = "setup", "Set up conditions"
        VERIFY_POSE = "verify_pose", "Verify camera pose"
        CALIBRATION = "calibration", "Calibration episode"
        CAPTURE = "capture", "Capture episodes"
        WRAP_UP = "wrap_up", "Wrap up"

    task = models.ForeignKey(CollectionTask, on_delete=models.CASCADE, related_name="steps")
    order = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    title = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    episodes = models.PositiveIntegerField(null=True, blank=True)
    target = models.ForeignKey(
        CaptureTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = TaskChildQuerySet.as_manager()

    class Meta:
        ordering = ["task", "order"]
        constraints = [
            models.UniqueConstraint(fields=["task", "order"], name="protocol_step_order_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.order}. {self.title}"


def field_photo_path(instance: FieldRecord, filename: str) -> str:
    """Store a setup photo under MEDIA_ROOT/field-photos/<org>/<record uuid><ext>."""
    suffix = "".join(
        c for c in (filename.rsplit(".", 1)[-1] if "." in filename else "") if c.isalnum()
    )
    return (
        f"field-photos/{instance.organization_id}/{instance.uuid}.{(suffix or 'bin')[:8].lower()}"
    )


class FieldRecordQuerySet(TenantQuerySet):
    operator_path = "organization"

    def _visible_to_operator_member(self, membership: Membership) -> FieldRecordQuerySet:
        qs = self.filter(organization_id=membership.organization_id)
        if membership.role == Role.FIELD:
            # Field members see what they wrote and what their team's tasks hold.
            qs = qs.filter(
                Q(author_id=membership.user_id) | Q(task__team__members=membership.user_id)
            )
        return qs.distinct() if membership.role == Role.FIELD else qs


class FieldRecord(models.Model):
    """One action a field tablet recorded, identified by the UUID the tablet generated.

    The tablet may send a record any number of times; ``(organization, uuid)`` is unique, so
    the first arrival is stored with what the server answered (``result``) and every replay
    gets that answer back. ``payload_sha256`` is the record's content (kind, task, payload):
    a replay with other content is refused. ``stale`` marks a record made against a task the
    manager has changed, cancelled or reassigned since the tablet saw it: it is kept, never
    applied over the manager's change, and shown to both sides.
    """

    class Kind(models.TextChoices):
        STEP_DONE = "step_done", "Step done"
        CAPTURE = "capture", "Episode captured"
        NOTE = "note", "Note"
        PHOTO = "photo", "Setup photo"
        START = "start", "Started"
        FINISH = "finish", "Finished"
        BLOCKED = "blocked", "Blocked"
        UNBLOCKED = "unblocked", "Unblocked"

    class StaleReason(models.TextChoices):
        NONE = "", "Current"
        CHANGED = "changed", "Task changed by the manager since the tablet saw it"
        CANCELLED = "cancelled", "Task cancelled"
        REASSIGNED = "reassigned", "Task no longer with the author's team"
        TARGET_REMOVED = "target_removed", "Target no longer on the task"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    uuid = models.UUIDField(help_text="Generated by the tablet; the idempotency key.")
    task = models.ForeignKey(CollectionTask, on_delete=models.PROTECT, related_name="field_records")
    target = models.ForeignKey(
        CaptureTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    step = models.ForeignKey(
        ProtocolStep, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    episode = models.OneToOneField(
        "labeling.Episode",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="field_record",
        help_text="The episode a capture record created.",
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    payload = models.JSONField(default=dict, blank=True)
    payload_sha256 = models.CharField(max_length=64)
    photo = models.FileField(upload_to=field_photo_path, blank=True, max_length=300)
    client_created_at = models.DateTimeField()
    received_at = models.DateTimeField(auto_now_add=True)
    result = models.JSONField(default=dict, blank=True)
    task_version_seen = models.PositiveIntegerField()
    stale = models.BooleanField(default=False)
    stale_reason = models.CharField(
        max_length=16, choices=StaleReason.choices, blank=True, default=StaleReason.NONE
    )

    objects = FieldRecordQuerySet.as_manager()

    class Meta:
        ordering = ["received_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "uuid"], name="field_record_uuid_unique"
            ),
            models.CheckConstraint(
                name="field_record_kind_valid",
                condition=Q(
                    kind__in=[
                        "step_done",
                        "capture",
                        "note",
                        "photo",
                        "start",
                        "finish",
                        "blocked",
                        "unblocked",
                    ]
                ),
            ),
            models.CheckConstraint(
                name="field_record_stale_has_reason",
                condition=Q(stale=False, stale_reason="") | (Q(stale=True) & ~Q(stale_reason="")),
            ),
        ]
        indexes = [
            models.Index(fields=["task", "kind"], name="field_record_task_kind"),
            models.Index(
                fields=["organization", "-received_at"],
                name="field_record_stale_recent",
                condition=Q(stale=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.uuid}"


class TaskRecordingQuerySet(TenantQuerySet):
    operator_path = "task__round__campaign__organization"

    def _visible_to_operator_member(self, membership: Membership) -> TaskRecordingQuerySet:
        qs = self.filter(**{self.operator_path: membership.organization_id})
        if membership.role == Role.FIELD:
            qs = qs.filter(task__team__members=membership.user_id)
        return qs


class TaskRecording(models.Model):
    """A recording uploaded for a collection task (a calibration episode or a captured one)."""

    class Kind(models.TextChoices):
        CALIBRATION = "calibration", "Calibration episode"
        EPISODE = "episode", "Captured episode"

    task = models.ForeignKey(CollectionTask, on_delete=models.CASCADE, related_name="recordings")
    recording = models.ForeignKey(
        "labeling.Recording", on_delete=models.PROTECT, related_name="task_links"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.EPISODE)
    # How the recording's takes were found: clock offset, method, matched and unmatched takes.
    takes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TaskRecordingQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["task", "recording"], name="task_recording_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} for {self.task}"
