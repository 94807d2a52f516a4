from django.contrib import admin

from accounts.admin import ScopedAdmin
from labeling.models import Dataset, Episode, InventoryImport


@admin.register(Dataset)
class DatasetAdmin(ScopedAdmin):
    list_display = ["name", "slug", "source", "embodiment", "format_version", "updated_at"]
    list_filter = ["source", "embodiment", "format_version"]
    search_fields = ["name", "slug", "description"]
    list_select_related = ["embodiment"]


@admin.register(Episode)
class EpisodeAdmin(ScopedAdmin):
    list_display = [
        "__str__",
        "embodiment",
        "site",
        "episode_count",
        "frames",
        "outcome",
        "sync_status",
        "label_status",
        "validated",
    ]
    list_filter = [
        "provenance",
        "outcome",
        "sync_status",
        "label_status",
        "validated",
        "embodiment",
    ]
    search_fields = ["key", "dataset__slug", "storage_uri"]
    list_select_related = ["dataset", "embodiment", "site"]
    raw_id_fields = ["dataset", "condition_set", "task", "failure_mode"]


@admin.register(InventoryImport)
class InventoryImportAdmin(ScopedAdmin):
    list_display = ["source_name", "dataset_name", "format", "job", "created_by", "created_at"]
    list_filter = ["format"]
    search_fields = ["source_name", "dataset_name"]
    list_select_related = ["job", "created_by"]
    raw_id_fields = ["dataset", "job"]
    readonly_fields = ["summary", "options", "source_path"]


from labeling.models import (  # noqa: E402
    Annotation,
    DatasetExport,
    GoldLabel,
    LabelAssignment,
    LabelJob,
    Recording,
    Review,
)


@admin.register(Recording)
class RecordingAdmin(ScopedAdmin):
    list_display = [
        "original_name",
        "status",
        "is_calibration",
        "size",
        "created_at",
        "validated_at",
    ]
    list_filter = ["status", "is_calibration"]
    search_fields = ["original_name", "sha256"]
    readonly_fields = ["sha256", "size", "storage_path", "report", "message", "status"]
    raw_id_fields = ["episode"]


@admin.register(LabelJob)
class LabelJobAdmin(ScopedAdmin):
    list_display = ["__str__", "status", "created_at"]
    list_filter = ["status"]


@admin.register(LabelAssignment)
class LabelAssignmentAdmin(ScopedAdmin):
    list_display = ["__str__", "status", "assigned_at"]
    list_filter = ["status"]
    raw_id_fields = ["episode"]


@admin.register(Annotation)
class AnnotationAdmin(ScopedAdmin):
    list_display = ["__str__", "outcome", "created_at"]
    raw_id_fields = ["assignment"]


@admin.register(Review)
class ReviewAdmin(ScopedAdmin):
    list_display = ["__str__", "decision", "created_at"]
    list_filter = ["decision"]
    raw_id_fields = ["episode"]


@admin.register(GoldLabel)
class GoldLabelAdmin(ScopedAdmin):
    list_display = ["__str__", "outcome"]
    raw_id_fields = ["episode"]


@admin.register(DatasetExport)
class DatasetExportAdmin(ScopedAdmin):
    list_display = ["__str__", "format", "created_at"]
    list_filter = ["format"]
