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
