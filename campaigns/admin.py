from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.admin import ScopedAdmin, ScopedInline
from campaigns.models import (
    Campaign,
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    FieldTeam,
    ProtocolStep,
    TaskTarget,
    TeamUnavailability,
)


class RoundInline(ScopedInline):
    model = CollectionRound
    fields = ["number", "status", "start_date", "days", "budget_episodes"]
    readonly_fields = ["status"]
    show_change_link = True


@admin.register(Campaign)
class CampaignAdmin(ScopedAdmin):
    list_display = [
        "name",
        "customer",
        "task",
        "reliability_goal",
        "start_date",
        "end_date",
        "status",
    ]
    list_filter = ["status", "customer"]
    search_fields = ["name", "slug"]
    filter_horizontal = ["embodiments", "deployments"]
    list_select_related = ["customer", "task"]
    inlines = [RoundInline]


class TargetInline(ScopedInline):
    model = CaptureTarget
    fields = ["label", "episodes_wanted", "priority", "locked", "rationale"]
    readonly_fields = ["label"]


@admin.register(CollectionRound)
class CollectionRoundAdmin(ScopedAdmin):
    list_display = ["__str__", "status", "start_date", "days", "budget_episodes"]
    list_filter = ["status", "campaign"]
    search_fields = ["campaign__name"]
    # Status moves only through campaigns.services.round_transition (the one place it is enforced).
    readonly_fields = ["status", "status_changed_at"]
    list_select_related = ["campaign"]
    inlines = [TargetInline]


@admin.register(CaptureTarget)
class CaptureTargetAdmin(ScopedAdmin):
    list_display = ["label", "round", "episodes_wanted", "priority", "locked"]
    list_filter = ["locked", "round__campaign"]
    search_fields = ["label", "rationale"]
    raw_id_fields = ["condition_set"]
    list_select_related = ["round__campaign"]


class UnavailabilityInline(ScopedInline):
    model = TeamUnavailability


@admin.register(FieldTeam)
class FieldTeamAdmin(ScopedAdmin):
    list_display = ["name", "home_base", "hours_per_day", "travel_speed_kmh"]
    search_fields = ["name", "slug", "home_base"]
    filter_horizontal = ["members", "embodiments"]
    inlines = [UnavailabilityInline]

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "members" and not request.user.is_superuser:
            from django.contrib.auth import get_user_model

            from accounts.models import membership_of

            membership = membership_of(request.user)
            users = get_user_model().objects.all()
            kwargs["queryset"] = (
                users.filter(membership__organization_id=membership.organization_id)
                if membership
                else users.none()
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class TaskTargetInline(ScopedInline):
    model = TaskTarget
    raw_id_fields = ["target"]


class ProtocolStepInline(ScopedInline):
    model = ProtocolStep
    raw_id_fields = ["target"]


@admin.register(CollectionTask)
class CollectionTaskAdmin(ScopedAdmin):
    list_display = ["__str__", "round", "team", "status", "start_at", "locked"]
    list_filter = ["status", "locked", "team", "round__campaign"]
    search_fields = ["site__name", "blocked_reason"]
    list_select_related = ["site", "team", "round__campaign"]
    inlines = [TaskTargetInline, ProtocolStepInline]
