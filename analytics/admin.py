from django.contrib import admin

from accounts.admin import ScopedAdmin, ScopedInline
from analytics.models import EvaluationResult, EvaluationRun, GapReport, PolicyVersion


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ScopedAdmin):
    list_display = ["name", "slug", "embodiment", "released_on"]
    list_filter = ["embodiment"]
    search_fields = ["name", "slug", "notes"]
    filter_horizontal = ["trained_on_datasets", "trained_on_rounds"]


class EvaluationResultInline(ScopedInline):
    model = EvaluationResult
    raw_id_fields = ["condition_set"]


@admin.register(EvaluationRun)
class EvaluationRunAdmin(ScopedAdmin):
    list_display = ["label", "policy_version", "deployment", "evaluated_on"]
    list_filter = ["policy_version", "deployment"]
    search_fields = ["label", "source"]
    list_select_related = ["policy_version", "deployment"]
    inlines = [EvaluationResultInline]


@admin.register(GapReport)
class GapReportAdmin(ScopedAdmin):
    list_display = ["__str__", "status", "n_cells", "finished_at"]
    list_filter = ["status", "campaign"]
    readonly_fields = ["summary", "sources", "params", "status", "n_cells"]
