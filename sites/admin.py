from django.contrib import admin

from accounts.admin import ScopedAdmin, ScopedInline
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionShare,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    ProductionLog,
    Site,
    Task,
)


class ActionDimensionInline(ScopedInline):
    model = ActionDimension


class CameraInline(ScopedInline):
    model = Camera


@admin.register(Embodiment)
class EmbodimentAdmin(ScopedAdmin):
    list_display = ["name", "slug", "morphology", "end_effector", "control_rate_hz"]
    list_filter = ["morphology", "end_effector"]
    search_fields = ["name", "slug", "robot_type"]
    inlines = [ActionDimensionInline, CameraInline]


class AccessWindowInline(ScopedInline):
    model = AccessWindow


@admin.register(Site)
class SiteAdmin(ScopedAdmin):
    list_display = ["name", "slug", "kind", "customer", "country", "region", "timezone"]
    list_filter = ["kind", "country", "customer"]
    search_fields = ["name", "slug", "address", "region"]
    filter_horizontal = ["presents"]
    inlines = [AccessWindowInline]


class ConditionValueInline(ScopedInline):
    model = ConditionValue


@admin.register(ConditionDimension)
class ConditionDimensionAdmin(ScopedAdmin):
    list_display = ["name", "slug", "kind", "stageable", "order"]
    list_filter = ["kind", "stageable"]
    search_fields = ["name", "slug", "values__label"]
    inlines = [ConditionValueInline]


class ConditionShareInline(ScopedInline):
    model = ConditionShare
    autocomplete_fields = ["value"]


@admin.register(ConditionValue)
class ConditionValueAdmin(ScopedAdmin):
    # Listed for search and autocomplete; values are edited inline under their dimension.
    list_display = ["label", "slug", "dimension", "order", "stageable"]
    list_filter = ["dimension"]
    search_fields = ["label", "slug", "dimension__name"]
    list_select_related = ["dimension"]


@admin.register(Deployment)
class DeploymentAdmin(ScopedAdmin):
    list_display = [
        "name",
        "customer",
        "site",
        "embodiment",
        "cycles_per_day",
        "reliability_target",
        "active",
    ]
    list_filter = ["active", "customer", "embodiment"]
    search_fields = ["name", "slug", "site__name"]
    list_select_related = ["customer", "site", "embodiment"]
    inlines = [ConditionShareInline]


@admin.register(Task)
class TaskAdmin(ScopedAdmin):
    list_display = ["name", "slug"]
    search_fields = ["name", "slug"]


class FailureModeChildInline(ScopedInline):
    model = FailureMode
    fk_name = "parent"
    fields = ["code", "name", "severity", "detectability"]
    exclude = ["organization"]


@admin.register(FailureMode)
class FailureModeAdmin(ScopedAdmin):
    list_display = ["code", "name", "parent", "severity", "detectability"]
    list_filter = ["severity", "detectability"]
    search_fields = ["code", "name", "description"]
    list_select_related = ["parent"]


@admin.register(FailureRecord)
class FailureRecordAdmin(ScopedAdmin):
    list_display = ["occurred_at", "deployment", "failure_mode", "intervention"]
    list_filter = ["intervention", "deployment", "failure_mode__parent"]
    search_fields = ["notes", "external_id", "failure_mode__name"]
    list_select_related = ["deployment", "failure_mode"]
    date_hierarchy = "occurred_at"
    raw_id_fields = ["condition_set"]


@admin.register(ProductionLog)
class ProductionLogAdmin(ScopedAdmin):
    list_display = ["day", "deployment", "cycles", "failures"]
    list_filter = ["deployment"]
    date_hierarchy = "day"
    raw_id_fields = ["condition_set"]
    list_select_related = ["deployment"]
