"""The training-data inventory: datasets and their episodes.

An :class:`Episode` row may stand for one recorded episode or for many (``episode_count``):
dataset overview sheets list whole datasets with an episode count, and both are first-class.
Every count in Fieldcraft is therefore ``SUM(episode_count)``, never ``COUNT(*)``.
Condition values live in ``condition_set`` (see :mod:`sites.models` for why they are interned).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounts.models import Organization, TenantQuerySet
from sites.models import ConditionSet, Embodiment, FailureMode, Site, Task


class DatasetQuerySet(TenantQuerySet):
    operator_path = "organization"


class Dataset(models.Model):
    class Source(models.TextChoices):
        IMPORTED = "imported", "Imported inventory"
        CAPTURED = "captured", "Captured in a collection round"
        EXPORTED = "exported", "Export target"

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

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="episodes")
    key = models.CharField(
        max_length=200, help_text="Stable identifier within the dataset (episode index, row key)."
    )
    embodiment = models.ForeignKey(
        Embodiment, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    condition_set = models.ForeignKey(
        ConditionSet, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    episode_count = models.PositiveIntegerField(
        default=1, help_text="How many episodes this row stands for (1 for a single episode)."
    )
    frames = models.BigIntegerField(default=0)
    duration_s = models.FloatField(default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.UNKNOWN)
    failure_mode = models.ForeignKey(
        FailureMode, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    storage_uri = models.CharField(max_length=500, blank=True)
    provenance = models.CharField(
        max_length=16, choices=Provenance.choices, default=Provenance.IMPORTED
    )
    sync_status = models.CharField(
        max_length=16, choices=SyncStatus.choices, default=SyncStatus.UNKNOWN
    )
    label_status = models.CharField(
        max_length=16, choices=LabelStatus.choices, default=LabelStatus.UNLABELLED
    )
    validated = models.BooleanField(
        default=True,
        help_text="Counts as training coverage. Imported episodes are; captured ones once "
        "capture validation passes.",
    )
    features = models.JSONField(
        default=dict, blank=True, help_text="Continuous measurements, e.g. light_lux, cam_dx_mm."
    )
    extra = models.JSONField(default=dict, blank=True)
    recorded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

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
        ]
        indexes = [
            # Covering index for the gap engine's GROUP BY: an index-only scan per organization.
            models.Index(
                fields=["organization", "embodiment", "condition_set"],
                name="episode_coverage_idx",
                include=["episode_count", "validated", "task"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.slug}#{self.key}"


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
