"""Policy versions, evaluation results per condition cell, and stored gap reports."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

from accounts.models import Job, Organization, TenantQuerySet
from campaigns.models import Campaign, CollectionRound
from labeling.models import Dataset
from sites.models import ConditionSet, Deployment, Embodiment, FailureMode, Site, Task


class PolicyQuerySet(TenantQuerySet):
    operator_path = "organization"


class PolicyVersion(models.Model):
    """A trained policy, with the datasets and rounds it was trained on."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    embodiment = models.ForeignKey(Embodiment, on_delete=models.PROTECT, related_name="policies")
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.PROTECT, related_name="policies"
    )
    trained_on_datasets = models.ManyToManyField(Dataset, blank=True, related_name="policies")
    trained_on_rounds = models.ManyToManyField(CollectionRound, blank=True, related_name="policies")
    released_on = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PolicyQuerySet.as_manager()

    class Meta:
        ordering = ["-released_on", "name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="policy_slug_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class EvaluationRunQuerySet(TenantQuerySet):
    operator_path = "organization"
    customer_path = "deployment__customer"


class EvaluationRun(models.Model):
    """Evaluation of one policy version at a deployment (or on a bench when no deployment)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    policy_version = models.ForeignKey(
        PolicyVersion, on_delete=models.CASCADE, related_name="evaluations"
    )
    deployment = models.ForeignKey(
        Deployment, null=True, blank=True, on_delete=models.PROTECT, related_name="evaluations"
    )
    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    label = models.CharField(max_length=200)
    evaluated_on = models.DateField()
    source = models.CharField(max_length=200, blank=True, help_text="File or system it came from.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = EvaluationRunQuerySet.as_manager()

    class Meta:
        ordering = ["-evaluated_on", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy_version", "label"], name="evaluation_run_label_unique"
            ),
        ]

    def __str__(self) -> str:
        where = self.deployment or "bench"
        return f"{self.policy_version} @ {where} ({self.evaluated_on})"


class EvaluationResultQuerySet(TenantQuerySet):
    operator_path = "run__organization"
    customer_path = "run__deployment__customer"


class EvaluationResult(models.Model):
    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="results")
    condition_set = models.ForeignKey(ConditionSet, on_delete=models.PROTECT, related_name="+")
    trials = models.PositiveIntegerField()
    successes = models.PositiveIntegerField()

    objects = EvaluationResultQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "condition_set"], name="evaluation_result_unique"
            ),
            models.CheckConstraint(
                name="evaluation_successes_le_trials", condition=Q(successes__lte=F("trials"))
            ),
        ]

    def __str__(self) -> str:
        return f"{self.successes}/{self.trials}"


class EvaluationFailureQuerySet(TenantQuerySet):
    operator_path = "result__run__organization"
    customer_path = "result__run__deployment__customer"


class EvaluationFailure(models.Model):
    result = models.ForeignKey(EvaluationResult, on_delete=models.CASCADE, related_name="failures")
    failure_mode = models.ForeignKey(FailureMode, on_delete=models.PROTECT, related_name="+")
    count = models.PositiveIntegerField()

    objects = EvaluationFailureQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["result", "failure_mode"], name="evaluation_failure_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.failure_mode}: {self.count}"


class GapReportQuerySet(TenantQuerySet):
    operator_path = "organization"
    customer_path = "campaign__customer"

    def finished(self) -> GapReportQuerySet:
        return self.filter(status=GapReport.Status.DONE)


class GapReport(models.Model):
    """A scored snapshot of coverage vs target for a campaign."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="gap_reports")
    job = models.OneToOneField(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="gap_report"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    dimension_slugs = models.JSONField(default=list, blank=True)
    params = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    sources = models.JSONField(
        default=list, blank=True, help_text="Per deployment: target source and observations."
    )
    n_cells = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = GapReportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["campaign", "status", "-created_at"])]

    def __str__(self) -> str:
        return f"Gap report {self.campaign} {self.created_at:%Y-%m-%d %H:%M}"


class GapCellQuerySet(TenantQuerySet):
    operator_path = "report__organization"
    customer_path = "report__campaign__customer"


class GapCell(models.Model):
    class Coverage(models.IntegerChoices):
        UNCOVERED = 0, "Uncovered"
        THIN = 1, "Thin"
        COVERED = 2, "Covered"

    # No index of its own: the unique (report, rank) constraint leads with it. No database
    # constraint either: its deferred check ran once per cell at commit (a fifth of storing
    # a report's thousands of cells). Cells are only written by the report's own store,
    # which locks and checks its report row first; the ORM still cascades deletes, and a
    # trigger deletes a report's cells with its row (migration 0007), so cells a concurrent
    # store commits meanwhile go too.
    report = models.ForeignKey(
        GapReport,
        on_delete=models.CASCADE,
        related_name="cells",
        db_index=False,
        db_constraint=False,
    )
    # The cell's condition values (sorted ids). Not an interned ConditionSet: a report holds
    # thousands of cells and only the few a plan targets need interning (done then).
    value_ids = ArrayField(models.IntegerField())
    label = models.CharField(max_length=500)
    rank = models.PositiveIntegerField()
    target_share = models.FloatField()
    train_count = models.FloatField()
    train_share = models.FloatField()
    coverage = models.PositiveSmallIntegerField(choices=Coverage.choices)
    trials = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    failure_rate = models.FloatField()
    failure_low = models.FloatField()
    failure_high = models.FloatField()
    interventions_per_day = models.FloatField()
    priority = models.FloatField(
        help_text="Interventions a day one more episode here avoids, here and in the cells it helps."
    )
    priority_elsewhere = models.FloatField(
        default=0.0, help_text="The part of priority that lies in the cells it helps."
    )
    effective_count = models.FloatField(
        null=True,
        blank=True,
        help_text="Training the cell's curve is read at: its own plus what transfers to it "
        "from cells sharing its conditions (null in reports made before transfer).",
    )
    explanation = models.TextField(blank=True)
    values = models.JSONField(default=dict, help_text="dimension slug → value slug")
    log_multiplier = ArrayField(
        models.FloatField(),
        null=True,
        blank=True,
        help_text="The cell's posterior of log m (quantiles at analytics.learning."
        "POSTERIOR_LEVELS) when the report read the cell on the campaign's evaluation history; "
        "null when it read the cell from its current outcomes alone.",
    )

    objects = GapCellQuerySet.as_manager()

    class Meta:
        ordering = ["report", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["report", "rank"], name="gap_cell_rank_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.label} (#{self.rank})"

    @property
    def transferred(self) -> float:
        """Episodes the cell's curve counts from cells sharing its conditions."""
        return 0.0 if self.effective_count is None else self.effective_count - self.train_count


class ShareQuerySet(TenantQuerySet):
    operator_path = "organization"
    customer_path = "customer"

    def live(self) -> ShareQuerySet:
        from django.utils import timezone

        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())


class DashboardShare(models.Model):
    """A read-only link to a customer's dashboard, with an expiry, revocable by a manager."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    customer = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="dashboard_shares"
    )
    token = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=200, blank=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ShareQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Share of {self.customer} until {self.expires_at:%Y-%m-%d}"

    @property
    def is_live(self) -> bool:
        from django.utils import timezone

        return self.revoked_at is None and self.expires_at > timezone.now()


class CurveFitQuerySet(TenantQuerySet):
    operator_path = "campaign__organization"
    customer_path = "campaign__customer"


class CurveFitRecord(models.Model):
    """A refit of a campaign's learning curves (pooled + per-cell deviations) after evaluations."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="curve_fits")
    dimension_slugs = models.JSONField(default=list)
    f_inf = models.FloatField()
    a = models.FloatField()
    b = models.FloatField()
    tau = models.FloatField(
        default=0.0, help_text="Spread of per-cell amplitude multipliers (log scale)."
    )
    source = models.CharField(max_length=32, help_text="fitted or prior")
    cells = models.JSONField(
        default=dict, help_text="cell key (sorted value ids) → posterior-mean amplitude"
    )
    posteriors = models.JSONField(
        default=dict,
        blank=True,
        help_text="cell key (sorted value ids) → the cell's posterior of log m at the "
        "refit's training counts, as quantiles at analytics.learning.POSTERIOR_LEVELS",
    )
    evidence = models.JSONField(default=dict)
    transfer = models.JSONField(
        default=dict,
        blank=True,
        help_text="How much an episode in one cell trains cells sharing its conditions: "
        "strength per dimension, interval, evaluations (TransferModel.stored).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = CurveFitQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Curves of {self.campaign} ({self.created_at:%Y-%m-%d %H:%M})"


class RoundImpactQuerySet(TenantQuerySet):
    operator_path = "round__campaign__organization"
    customer_path = "round__campaign__customer"


class RoundImpactReport(models.Model):
    """How a round moved the policy, precomputed for pages and dashboards."""

    round = models.ForeignKey(
        CollectionRound, on_delete=models.CASCADE, related_name="impact_reports"
    )
    before_policy = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    after_policy = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    dimension_slugs = models.JSONField(default=list)
    summary = models.JSONField(default=dict)
    cells = models.JSONField(default=list)
    sites = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RoundImpactQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Impact of {self.round}"


class ForecastQuerySet(TenantQuerySet):
    operator_path = "campaign__organization"
    customer_path = "campaign__customer"


class CampaignForecast(models.Model):
    """A synthetic campaign played forward under each strategy, for one set of parameters.

    Computed by a job and stored, so a reload shows it at once. The simulated world depends on
    the parameters only (never on the campaign's data), so a stored forecast stays true.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="forecasts")
    rounds = models.PositiveSmallIntegerField()
    budget = models.PositiveIntegerField()
    seed = models.PositiveIntegerField()
    world = models.CharField(
        max_length=16,
        default="default",
        help_text="The simulated world's family (analytics.steering.simulate.WORLD_FAMILIES).",
    )
    production_days = models.PositiveSmallIntegerField(
        default=0, help_text="Days of each policy's production the record holds."
    )
    earlier_release = models.PositiveIntegerField(
        default=0,
        help_text="Episodes of the last collection before the campaign; 0: the record starts "
        "with the campaign's first policy.",
    )
    worlds = models.PositiveSmallIntegerField(
        default=1, help_text="How many worlds (seeds from seed on) the figures are medians of."
    )
    job = models.OneToOneField(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="forecast"
    )
    result = models.JSONField(default=dict, blank=True, help_text="Per strategy: the figures.")
    computed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ForecastQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "campaign",
                    "rounds",
                    "budget",
                    "seed",
                    "world",
                    "production_days",
                    "earlier_release",
                    "worlds",
                ],
                name="forecast_one_per_parameters",
            )
        ]

    def __str__(self) -> str:
        return (
            f"Forecast of {self.campaign}: {self.rounds} rounds × {self.budget} (seed "
            f"{self.seed}, world {self.world})"
        )
