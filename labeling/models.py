"""The training-data inventory: datasets and their episodes.

An :class:`Episode` row may stand for one recorded episode or for many (``episode_count``):
dataset overview sheets list whole datasets with an episode count, and both are first-class.
Every count in Fieldcraft is therefore ``SUM(episode_count)``, never ``COUNT(*)``.
Condition values live in ``condition_set`` (see :mod:`sites.models` for why they are interned).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import BrinIndex
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Count, Exists, F, OuterRef, Q, Value
from django.db.models.functions import Now

from accounts.models import Membership, Organization, Role, TenantQuerySet
from sites.models import (
    ConditionSet,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    Site,
    Task,
)


class DatasetQuerySet(TenantQuerySet):
    operator_path = "organization"


class Dataset(models.Model):
    class Source(models.TextChoices):
        IMPORTED = "imported", "Imported inventory"
        CAPTURED = "captured", "Captured in a collection round"
        EXPORTED = "exported", "Export target"
        PRODUCTION = "production", "Interventions recorded in production"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORTED)
    description = models.TextField(blank=True)
    embodiment = models.ForeignKey(
        Embodiment,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="datasets",
        help_text="Default embodiment of its episodes.",
    )
    fps = models.FloatField(null=True, blank=True)
    # Set on a deployment's production dataset only (labeling.production): one per deployment.
    deployment = models.OneToOneField(
        Deployment,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="production_dataset",
        help_text="The deployment whose interventions this dataset holds (production datasets).",
    )
    format_version = models.CharField(max_length=32, blank=True, help_text="e.g. LeRobot v3.0")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DatasetQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="dataset_slug_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class EpisodeQuerySet(TenantQuerySet):
    operator_path = "organization"

    def countable(self) -> EpisodeQuerySet:
        """Episodes that count as training coverage (imported, or captured and validated)."""
        return self.filter(validated=True).exclude(label_status=Episode.LabelStatus.REJECTED)


class Episode(models.Model):
    class Outcome(models.TextChoices):
        SUCCESS = "success", "Success"
        FAILURE = "failure", "Failure"
        UNKNOWN = "unknown", "Unknown"

    class Provenance(models.TextChoices):
        IMPORTED = "imported", "Imported"
        CAPTURED = "captured", "Captured by a collection task"
        PRODUCTION = "production", "Recorded by a deployed robot (an intervention)"

    class SyncStatus(models.TextChoices):
        UNKNOWN = "unknown", "Not validated"
        SYNCED = "synced", "Synchronised"
        DESYNCED = "desynced", "Out of sync"
        INCOMPLETE = "incomplete", "Incomplete recording"

    class LabelStatus(models.TextChoices):
        UNLABELLED = "unlabelled", "Unlabelled"
        IN_PROGRESS = "in_progress", "Being labelled"
        LABELLED = "labelled", "Labelled, awaiting review"
        ACCEPTED = "accepted", "Accepted"
        REJECTED = "rejected", "Rejected"

    # Bulk loads decide this table's shape. A 1,000,000-row manifest must load within a few
    # times a bare COPY, and PostgreSQL checks a foreign key with one query per row and per
    # key: seven keys cost ~30 µs a row, most of the 18.5x a bare COPY that inserting typed
    # rows used to cost (2.7-3.2x now). So the references below carry no database constraint (``db_constraint=False``): the importer resolves every id from the
    # organization's own rows and locks them (``FOR KEY SHARE``, once per referenced row, not
    # per episode) in the transaction that writes the episodes; every other writer is the ORM
    # with loaded objects; ``on_delete`` (CASCADE, PROTECT) is applied by Django as before.
    # ``tests/labeling/test_import_direct.py`` holds both sides to it. No B-tree index
    # either beyond the unique (dataset, key): each costs ~1.3 s per 1,000,000 rows loaded;
    # the gap engine's per-organization GROUP BY reads the heap (a parallel scan) and the
    # BRIN index lets it skip other organizations' block ranges.
    organization = models.ForeignKey(
        Organization,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    dataset = models.ForeignKey(
        Dataset,
        on_delete=models.CASCADE,
        related_name="episodes",
        db_index=False,
        db_constraint=False,
    )
    key = models.CharField(
        max_length=200, help_text="Stable identifier within the dataset (episode index, row key)."
    )
    embodiment = models.ForeignKey(
        Embodiment,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    site = models.ForeignKey(
        Site,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    task = models.ForeignKey(
        Task,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    condition_set = models.ForeignKey(
        ConditionSet,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    episode_count = models.PositiveIntegerField(
        default=1, help_text="How many episodes this row stands for (1 for a single episode)."
    )
    frames = models.BigIntegerField(default=0)
    duration_s = models.FloatField(default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.UNKNOWN)
    failure_mode = models.ForeignKey(
        FailureMode,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    storage_uri = models.CharField(max_length=500, blank=True)
    # The intervention a production episode records (labeling.production). No B-tree index
    # for the bulk loads' sake (see above) but the partial unique one, which only holds the
    # few rows that have a record. Unset in the database too when the record goes, also when
    # the production ingest deletes it in SQL (a trigger of migration 0009, not a foreign key
    # constraint: that would cost a check per row of every COPY).
    failure_record = models.ForeignKey(
        FailureRecord,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="episodes",
        db_index=False,
        db_constraint=False,
    )
    # Database defaults too (``db_default``): a bulk COPY leaves these columns out.
    provenance = models.CharField(
        max_length=16,
        choices=Provenance.choices,
        default=Provenance.IMPORTED,
        db_default=Provenance.IMPORTED,
    )
    sync_status = models.CharField(
        max_length=16, choices=SyncStatus.choices, default=SyncStatus.UNKNOWN
    )
    label_status = models.CharField(
        max_length=16, choices=LabelStatus.choices, default=LabelStatus.UNLABELLED
    )
    validated = models.BooleanField(
        default=True,
        db_default=True,
        help_text="Counts as training coverage. Imported episodes are; captured ones once "
        "capture validation passes.",
    )
    features = models.JSONField(
        default=dict,
        db_default=Value({}, output_field=models.JSONField()),
        blank=True,
        help_text="Continuous measurements, e.g. light_lux, cam_dx_mm.",
    )
    extra = models.JSONField(
        default=dict, db_default=Value({}, output_field=models.JSONField()), blank=True
    )
    recorded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_default=Now())
    updated_at = models.DateTimeField(auto_now=True, db_default=Now())

    objects = EpisodeQuerySet.as_manager()

    class Meta:
        ordering = ["dataset", "id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="episode_key_unique"),
            models.CheckConstraint(
                name="episode_count_positive", condition=Q(episode_count__gte=1)
            ),
            models.CheckConstraint(name="episode_frames_nonnegative", condition=Q(frames__gte=0)),
            models.CheckConstraint(
                name="episode_duration_nonnegative", condition=Q(duration_s__gte=0)
            ),
            models.CheckConstraint(
                name="episode_outcome_valid",
                condition=Q(outcome__in=["success", "failure", "unknown"]),
            ),
            models.UniqueConstraint(
                fields=["failure_record"],
                condition=Q(failure_record__isnull=False),
                name="episode_failure_record_unique",
            ),
        ]
        indexes = [
            BrinIndex(fields=["organization"], name="episode_org_brin", autosummarize=True),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.slug}#{self.key}"


class CoverageCount(models.Model):
    """Countable episodes per (organization, dataset, embodiment, task, condition set).

    Maintained by PostgreSQL, not by Django: statement-level triggers on ``labeling_episode``
    (migration 0008) add each statement's delta, so every writer (COPY imports, capture,
    label review, deletes and cascades) keeps it current and a gap report reads thousands of
    these rows instead of grouping millions of episodes. Only countable episodes are in it
    (:meth:`EpisodeQuerySet.countable` with a condition set). The grain answers every
    training-coverage read exactly: a task or all tasks, all datasets or a policy's.
    ``python manage.py coverage_check`` compares it with a fresh ``GROUP BY``.
    """

    # Plain integer columns to the database (no constraint, no cascade): rows come and go
    # with their episodes, through the triggers.
    organization = models.ForeignKey(
        Organization,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    dataset = models.ForeignKey(
        Dataset,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    embodiment = models.ForeignKey(
        Embodiment,
        null=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    task = models.ForeignKey(
        Task,
        null=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    condition_set = models.ForeignKey(
        ConditionSet,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    episodes = models.BigIntegerField(help_text="SUM(episode_count) of the countable rows.")
    rows = models.BigIntegerField(help_text="Countable episode rows; the row goes at zero.")

    class Meta:
        constraints = [
            # Reads filter by organization then task: the key's order serves them.
            models.UniqueConstraint(
                fields=["organization", "task", "embodiment", "condition_set", "dataset"],
                name="coverage_count_key",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.condition_set_id}/{self.embodiment_id}: {self.episodes}"


class InventoryImportQuerySet(TenantQuerySet):
    operator_path = "organization"


class InventoryImport(models.Model):
    """One import of a training-data inventory (a LeRobot dataset or a tabular manifest).

    The work runs as a :class:`~accounts.models.Job` (progress, cancellation, problems); this
    row keeps what was asked for (source, format, options) and what came of it (``summary``).
    ``dataset`` is filled when the import succeeds; a failed import writes no episodes.
    """

    class Format(models.TextChoices):
        LEROBOT = "lerobot", "LeRobot dataset"
        CSV = "csv", "CSV"
        TSV = "tsv", "TSV"
        PARQUET = "parquet", "Parquet"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    dataset_name = models.CharField(max_length=200)
    dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="imports"
    )
    source_path = models.CharField(max_length=1000, help_text="File or folder on the server.")
    source_name = models.CharField(max_length=300, help_text="What the person uploaded or named.")
    format = models.CharField(max_length=16, choices=Format.choices, blank=True)
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="mapping, sets, create_values, embodiment, site as given.",
    )
    job = models.OneToOneField(
        "accounts.Job", on_delete=models.CASCADE, related_name="inventory_import"
    )
    summary = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = InventoryImportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "-created_at"], name="inventory_import_recent")
        ]
        constraints = [
            models.CheckConstraint(
                name="inventory_import_format_valid",
                condition=Q(format__in=["", "lerobot", "csv", "tsv", "parquet"]),
            ),
        ]

    def __str__(self) -> str:
        return f"Import of {self.source_name} into {self.dataset_name}"


class RecordingQuerySet(TenantQuerySet):
    operator_path = "organization"


class Recording(models.Model):
    """A stored capture recording (one or more MCAP files, stored once per content) and its validation."""

    class Status(models.TextChoices):
        RECEIVED = "received", "Received"
        VALIDATING = "validating", "Validating"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"
        UNREADABLE = "unreadable", "Unreadable"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField()
    original_name = models.CharField(max_length=300)
    storage_path = models.CharField(max_length=1000)
    embodiment = models.ForeignKey(
        Embodiment, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    episode = models.ForeignKey(
        Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="recordings"
    )
    is_calibration = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RECEIVED)
    report = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    validated_at = models.DateTimeField(null=True, blank=True)

    objects = RecordingQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "sha256"], name="recording_content_unique"
            ),
            models.CheckConstraint(name="recording_size_positive", condition=Q(size__gt=0)),
        ]

    def __str__(self) -> str:
        return f"{self.original_name} ({self.get_status_display()})"


class RecordingSegmentQuerySet(TenantQuerySet):
    operator_path = "recording__organization"


class RecordingSegment(models.Model):
    """One take of a longer recording: the span of the recording (its own clock, capture ns)
    that is this episode. A recording holding one take links its episode directly instead."""

    recording = models.ForeignKey(Recording, on_delete=models.CASCADE, related_name="segments")
    episode = models.OneToOneField(
        Episode, on_delete=models.CASCADE, related_name="recording_segment"
    )
    start_ns = models.BigIntegerField()
    end_ns = models.BigIntegerField()
    # Tablet clock − recording clock, as estimated when the takes were matched (ms).
    clock_offset_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RecordingSegmentQuerySet.as_manager()

    class Meta:
        ordering = ["recording", "start_ns"]
        constraints = [
            models.CheckConstraint(
                name="recording_segment_span_positive", condition=Q(end_ns__gt=F("start_ns"))
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recording} [{self.start_ns}, {self.end_ns})"


class RecordingUpload(models.Model):
    """A resumable upload in progress: bytes arrive in order, the checksum is verified at the end."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    filename = models.CharField(max_length=300)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    received = models.BigIntegerField(default=0)
    path = models.CharField(max_length=1000)
    context = models.JSONField(default=dict, blank=True, help_text="task, kind, episode key")
    recording = models.ForeignKey(
        Recording, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RecordingQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                name="upload_received_within_size", condition=Q(received__lte=F("size"))
            ),
            models.CheckConstraint(name="upload_size_positive", condition=Q(size__gt=0)),
        ]

    def __str__(self) -> str:
        return f"{self.filename}: {self.received}/{self.size} bytes"

    @property
    def complete(self) -> bool:
        return self.received >= self.size


# --- labels: jobs, assignments, annotations, gold, reviews, exports ------------------------
#
# A dataset has at most one LabelJob; every single-episode row of the dataset is one
# LabelItem of the job, which says how many annotations it needs (1, or the job's overlap
# for the share of episodes labelled twice or more) and how many assignments hold it now
# (``claims``). The check constraint ``claims <= required`` is what keeps a single-annotation
# episode with at most one annotator at a time; the queue claims items with
# ``SELECT ... FOR UPDATE SKIP LOCKED`` (see :mod:`labeling.labels.services`).


class LabelJobQuerySet(TenantQuerySet):
    operator_path = "organization"

    def with_counts(self) -> LabelJobQuerySet:
        """Annotate each job's items by the state of their episode, in one grouped query:
        ``n_items``, ``n_backlog`` (not labelled yet), ``n_available`` (backlog that still
        needs an annotator, gold aside), ``n_review``, ``n_accepted``, ``n_rejected``.

        Plain counts (an item joins one episode): add no filter that joins another
        many-valued relation to the same query, or they would count rows twice."""
        s = Episode.LabelStatus
        status = "items__episode__label_status"
        backlog = Q(**{f"{status}__in": (s.UNLABELLED, s.IN_PROGRESS)})
        return self.annotate(
            n_items=Count("items"),
            n_backlog=Count("items", filter=backlog),
            n_available=Count(
                "items",
                filter=backlog & Q(items__is_gold=False, items__claims__lt=F("items__required")),
            ),
            n_review=Count("items", filter=Q(**{status: s.LABELLED})),
            n_accepted=Count("items", filter=Q(**{status: s.ACCEPTED})),
            n_rejected=Count("items", filter=Q(**{status: s.REJECTED})),
        )


class LabelJob(models.Model):
    """Labelling of one dataset: what to label, how much overlap, how much gold, who made it."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    dataset = models.OneToOneField(Dataset, on_delete=models.CASCADE, related_name="label_job")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    overlap_share = models.FloatField(
        default=0.2,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of episodes labelled by several annotators (for agreement).",
    )
    annotators_per_overlap = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(2), MaxValueValidator(10)],
        help_text="How many annotators label each overlapped episode.",
    )
    gold_share = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of an annotator's items that are gold episodes (while unseen gold remains).",
    )
    accuracy_threshold = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Gold accuracy below which an annotator's single-labelled episodes go to review.",
    )
    dimensions = ArrayField(
        models.IntegerField(),
        default=list,
        blank=True,
        help_text="Condition dimension ids to label; empty: every dimension of the organization.",
    )
    claim_minutes = models.PositiveIntegerField(
        default=30, help_text="An unfinished claim is released after this many minutes."
    )
    instructions = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = LabelJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                name="label_job_status_valid", condition=Q(status__in=["open", "closed"])
            ),
            models.CheckConstraint(
                name="label_job_overlap_share_range",
                condition=Q(overlap_share__gte=0) & Q(overlap_share__lte=1),
            ),
            models.CheckConstraint(
                name="label_job_gold_share_range",
                condition=Q(gold_share__gte=0) & Q(gold_share__lte=1),
            ),
            models.CheckConstraint(
                name="label_job_accuracy_threshold_range",
                condition=Q(accuracy_threshold__gte=0) & Q(accuracy_threshold__lte=1),
            ),
            models.CheckConstraint(
                name="label_job_overlap_annotators",
                condition=Q(annotators_per_overlap__gte=2) & Q(annotators_per_overlap__lte=10),
            ),
            models.CheckConstraint(
                name="label_job_claim_minutes_positive", condition=Q(claim_minutes__gte=1)
            ),
        ]

    def __str__(self) -> str:
        return f"Labelling of {self.dataset}"


class LabelItemQuerySet(TenantQuerySet):
    operator_path = "job__organization"


class LabelItem(models.Model):
    """One episode of a label job: annotations it needs, and assignments holding it now."""

    job = models.ForeignKey(LabelJob, on_delete=models.CASCADE, related_name="items")
    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="label_item")
    required = models.PositiveSmallIntegerField(default=1)
    claims = models.PositiveSmallIntegerField(
        default=0, help_text="Assignments assigned or done (skipped and released ones are not)."
    )
    is_gold = models.BooleanField(
        default=False, help_text="A gold episode: every annotator labels it once, for accuracy."
    )

    objects = LabelItemQuerySet.as_manager()

    class Meta:
        ordering = ["job", "id"]
        constraints = [
            models.CheckConstraint(
                name="label_item_required_positive", condition=Q(required__gte=1)
            ),
            # A single-annotation episode is held by at most one annotator at a time.
            models.CheckConstraint(
                name="label_item_claims_within_required",
                condition=Q(is_gold=True) | Q(claims__lte=F("required")),
            ),
        ]
        indexes = [
            models.Index(fields=["job", "is_gold", "-claims", "id"], name="label_item_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id} in {self.job_id} ({self.claims}/{self.required})"


class LabelAssignmentQuerySet(TenantQuerySet):
    operator_path = "job__organization"

    def _visible_to_operator_member(self, membership: Membership) -> LabelAssignmentQuerySet:
        qs = self.filter(job__organization_id=membership.organization_id)
        if membership.role == Role.ANNOTATOR:
            qs = qs.filter(annotator_id=membership.user_id)  # annotators see their own work
        return qs


class LabelAssignment(models.Model):
    """An episode handed to one annotator; never the same episode twice to the same person."""

    class Status(models.TextChoices):
        ASSIGNED = "assigned", "Assigned"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped"

    job = models.ForeignKey(LabelJob, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(LabelItem, on_delete=models.CASCADE, related_name="assignments")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="label_assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="label_assignments"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ASSIGNED)
    assigned_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = LabelAssignmentQuerySet.as_manager()

    class Meta:
        ordering = ["-assigned_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["episode", "annotator"], name="label_assignment_once_per_annotator"
            ),
            models.UniqueConstraint(
                fields=["job", "annotator"],
                condition=Q(status="assigned"),
                name="label_assignment_one_open_claim",
            ),
            models.CheckConstraint(
                name="label_assignment_status_valid",
                condition=Q(status__in=["assigned", "done", "skipped"]),
            ),
        ]
        indexes = [
            models.Index(fields=["job", "status", "expires_at"], name="label_assignment_open"),
            models.Index(fields=["job", "finished_at"], name="label_assignment_finished"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id} for {self.annotator_id} ({self.status})"


class AnnotationQuerySet(TenantQuerySet):
    operator_path = "assignment__job__organization"

    def _visible_to_operator_member(self, membership: Membership) -> AnnotationQuerySet:
        qs = self.filter(assignment__job__organization_id=membership.organization_id)
        if membership.role == Role.ANNOTATOR:
            qs = qs.filter(annotator_id=membership.user_id)
        return qs


class Annotation(models.Model):
    """What one annotator said about one episode: conditions present, outcome, failure mode."""

    assignment = models.OneToOneField(
        LabelAssignment, on_delete=models.CASCADE, related_name="annotation"
    )
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="annotations"
    )
    value_ids = ArrayField(
        models.IntegerField(), default=list, blank=True, help_text="Sorted ConditionValue ids."
    )
    outcome = models.CharField(max_length=16, choices=Episode.Outcome.choices)
    failure_mode = models.ForeignKey(
        FailureMode, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    notes = models.TextField(blank=True)
    flagged = models.BooleanField(default=False, help_text="The annotator asked for a review.")
    seconds_spent = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AnnotationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                name="annotation_outcome_valid",
                condition=Q(outcome__in=["success", "failure", "unknown"]),
            ),
            models.CheckConstraint(
                name="annotation_failure_mode_only_on_failure",
                condition=Q(failure_mode__isnull=True) | Q(outcome="failure"),
            ),
            models.CheckConstraint(
                name="annotation_seconds_nonnegative",
                condition=Q(seconds_spent__isnull=True) | Q(seconds_spent__gte=0),
            ),
        ]

    def __str__(self) -> str:
        return f"Annotation of {self.episode_id} by {self.annotator_id}"


class GoldLabelQuerySet(TenantQuerySet):
    operator_path = "organization"

    def _visible_to_operator_member(self, membership: Membership) -> GoldLabelQuerySet:
        if membership.role != Role.MANAGER:
            return self.none()  # the answers annotators are scored against
        return self.filter(organization_id=membership.organization_id)


class GoldLabel(models.Model):
    """Known labels of an episode; annotators' answers on it score their accuracy."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="gold_label")
    value_ids = ArrayField(models.IntegerField(), default=list, blank=True)
    outcome = models.CharField(max_length=16, choices=Episode.Outcome.choices)
    failure_mode = models.ForeignKey(
        FailureMode, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GoldLabelQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                name="gold_label_outcome_valid",
                condition=Q(outcome__in=["success", "failure", "unknown"]),
            ),
            models.CheckConstraint(
                name="gold_label_failure_mode_only_on_failure",
                condition=Q(failure_mode__isnull=True) | Q(outcome="failure"),
            ),
        ]

    def __str__(self) -> str:
        return f"Gold labels of {self.episode_id}"


class ReviewQuerySet(TenantQuerySet):
    operator_path = "organization"

    def _visible_to_operator_member(self, membership: Membership) -> ReviewQuerySet:
        qs = self.filter(organization_id=membership.organization_id)
        if membership.role == Role.ANNOTATOR:
            # Feedback on their own work, but never on a gold episode: its accepted labels
            # are the answer annotators are scored against (gold labels are managers' only).
            qs = qs.filter(
                Exists(
                    Annotation.objects.filter(
                        episode_id=OuterRef("episode_id"), annotator_id=membership.user_id
                    )
                )
            ).exclude(Exists(GoldLabel.objects.filter(episode_id=OuterRef("episode_id"))))
        return qs


class Review(models.Model):
    """A reviewer's decision on an episode: accept with resolved labels, or reject with a reason."""

    class Decision(models.TextChoices):
        ACCEPT = "accept", "Accept"
        REJECT = "reject", "Reject"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(LabelJob, on_delete=models.CASCADE, related_name="reviews")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="label_reviews"
    )
    decision = models.CharField(max_length=16, choices=Decision.choices)
    value_ids = ArrayField(models.IntegerField(), default=list, blank=True)
    outcome = models.CharField(
        max_length=16, choices=Episode.Outcome.choices, default=Episode.Outcome.UNKNOWN
    )
    failure_mode = models.ForeignKey(
        FailureMode, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ReviewQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                name="review_decision_valid", condition=Q(decision__in=["accept", "reject"])
            ),
            models.CheckConstraint(
                name="review_reject_has_reason", condition=Q(decision="accept") | ~Q(reason="")
            ),
            models.CheckConstraint(
                name="review_failure_mode_only_on_failure",
                condition=Q(failure_mode__isnull=True) | Q(outcome="failure"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_decision_display()} {self.episode_id}"


class DatasetExportQuerySet(TenantQuerySet):
    operator_path = "organization"


class DatasetExport(models.Model):
    """One export of a dataset's synchronised, accepted episodes in a training format."""

    class Format(models.TextChoices):
        LEROBOT_V3 = "lerobot-v3", "LeRobot v3.0"
        LEROBOT_V21 = "lerobot-v2.1", "LeRobot v2.1"
        PARQUET = "parquet", "Parquet manifest"
        CSV = "csv", "CSV manifest"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="exports")
    format = models.CharField(max_length=16, choices=Format.choices)
    job = models.OneToOneField(
        "accounts.Job", on_delete=models.CASCADE, related_name="dataset_export"
    )
    path = models.CharField(max_length=1000, blank=True, help_text="The zip file, when written.")
    summary = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = DatasetExportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                name="dataset_export_format_valid",
                condition=Q(format__in=["lerobot-v3", "lerobot-v2.1", "parquet", "csv"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_format_display()} export of {self.dataset}"
