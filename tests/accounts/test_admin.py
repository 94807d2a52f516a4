"""Admin lists are scoped like every other surface: a manager sees their own rows only."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

MODELS = [
    m
    for m in admin.site._registry
    if m._meta.app_label in {"sites", "labeling", "campaigns", "analytics", "accounts"}
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_admin_changelist_opens_and_hides_other_organizations(model, world_a, world_b, client_for):
    from accounts.models import Organization

    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    response = client_for(world_a.manager).get(url)

    if model is Organization:
        # Tenants themselves are managed by superusers only: they list every organization.
        assert response.status_code == 403, url
        return
    assert response.status_code == 200, url
    assert "qzbravo" not in response.content.decode().lower()


@pytest.mark.parametrize(
    "name", ["deployment", "site", "embodiment", "failure_record", "episode", "campaign", "round"]
)
def test_admin_change_page_of_another_organizations_object_is_not_found(
    name, world_a, world_b, client_for
):
    obj = getattr(world_b, name)
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])

    response = client_for(world_a.manager).get(url)

    # What the admin does for an object outside its queryset: back to the index, nothing shown.
    assert response.status_code == 302
    assert response.url == reverse("admin:index")
