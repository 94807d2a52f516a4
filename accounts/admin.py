"""Admin for data stewards, scoped like every other surface.

:class:`ScopedAdmin` lists only what the signed-in member may see (through the model's
``visible_to``), limits foreign-key choices the same way, lets managers edit their own
organization's rows, and fills ``organization`` on new rows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest

from accounts.models import AuditEvent, Job, Membership, Organization, Role, membership_of


def _scoped(model: type[models.Model], request: HttpRequest) -> models.QuerySet[Any] | None:
    qs = model._default_manager.get_queryset()
    if hasattr(qs, "visible_to"):
        return qs.visible_to(request.user)
    return None


class ScopedAdmin(admin.ModelAdmin):
    list_per_page = 50
    show_full_result_count = False  # COUNT(*) on millions of episodes is not worth it

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        if hasattr(qs, "visible_to"):
            return qs.visible_to(request.user)
        return qs.none()

    def get_list_filter(self, request: HttpRequest) -> Any:
        # A foreign-key filter lists every related row by default, other tenants' included;
        # RelatedOnlyFieldListFilter offers only values present in the scoped changelist.
        filters: list[Any] = []
        for item in super().get_list_filter(request):
            if isinstance(item, str) and "__" not in item:
                field = self.model._meta.get_field(item)
                if field.is_relation:
                    filters.append((item, admin.RelatedOnlyFieldListFilter))
                    continue
            if isinstance(item, str) and "__" in item:
                # Paths through relations (e.g. round__campaign) get the same treatment.
                filters.append((item, admin.RelatedOnlyFieldListFilter))
                continue
            filters.append(item)
        return filters

    def _is_manager(self, request: HttpRequest) -> bool:
        if request.user.is_superuser:
            return True
        membership = membership_of(request.user)
        return bool(
            membership and membership.role == Role.MANAGER and membership.organization.is_operator
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff and self._is_manager(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not request.user.is_superuser:
            scoped = _scoped(db_field.related_model, request)
            if scoped is not None:
                kwargs["queryset"] = scoped
            elif db_field.related_model is Organization:
                membership = membership_of(request.user)
                org_id = membership.organization_id if membership else None
                kwargs["queryset"] = Organization.objects.filter(
                    models.Q(pk=org_id) | models.Q(operator_id=org_id)
                )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not request.user.is_superuser:
            scoped = _scoped(db_field.related_model, request)
            if scoped is not None:
                kwargs["queryset"] = scoped
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        excluded = list(super().get_exclude(request, obj) or [])
        if not request.user.is_superuser and any(
            f.name == "organization" for f in self.model._meta.fields
        ):
            excluded.append("organization")
        return excluded

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change and hasattr(obj, "organization_id") and not obj.organization_id:
            membership = membership_of(request.user)
            if membership is not None:
                obj.organization_id = membership.organization_id
        super().save_model(request, obj, form, change)


class ScopedInline(admin.TabularInline):
    extra = 0

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not request.user.is_superuser:
            scoped = _scoped(db_field.related_model, request)
            if scoped is not None:
                kwargs["queryset"] = scoped
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "kind", "operator", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(Job)
class JobAdmin(ScopedAdmin):
    list_display = ["kind", "title", "status", "progress_done", "progress_total", "created_at"]
    list_filter = ["kind", "status"]
    search_fields = ["title", "message"]
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ScopedAdmin):
    list_display = ["at", "actor", "verb", "object_type", "object_repr"]
    list_filter = ["verb", "object_type"]
    search_fields = ["object_repr", "object_id", "actor__username"]
    readonly_fields = [f.name for f in AuditEvent._meta.fields]
    date_hierarchy = "at"

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
