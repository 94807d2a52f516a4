"""A deployment's production events from a file: upload, progress, what each import stored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.generic import TemplateView

from accounts.models import Job
from analytics.services.production_files import IMPORT_KIND, production_import_request
from frontend.views.base import MANAGERS, JobProgressView, MemberView
from labeling.services import inventory_upload_store
from sites.models import Deployment


class ProductionFileForm(forms.Form):
    file = forms.FileField(
        help_text="CSV, TSV, Parquet or JSON Lines: one event a row (event_id, occurred_at, "
        "kind, outcome, failure_mode, intervened_by, duration_s, policy, note, recording, op; "
        "other columns are condition dimensions)."
    )
    create_values = forms.BooleanField(
        required=False,
        label="Add condition values the taxonomy does not have yet",
        help_text="Otherwise an unknown value stops the import, listed with how many rows "
        "carry it.",
    )


def _deployment(view: MemberView, pk: int) -> Deployment:
    return get_object_or_404(view.owned(Deployment.objects.select_related("site")), pk=pk)


def _imports(deployment: Deployment) -> list[Job]:
    return list(
        Job.objects.filter(
            organization_id=deployment.organization_id,
            kind=IMPORT_KIND,
            task_kwargs__deployment_id=deployment.pk,
        ).order_by("-created_at")[:10]
    )


class DeploymentProduction(MemberView, TemplateView):
    """Upload a file of production events for a deployment; see its imports."""

    roles = MANAGERS
    scoped_model = Deployment
    template_name = "frontend/planner/deployment_production.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        deployment = _deployment(self, kwargs["pk"])
        imports = _imports(deployment)
        return super().get_context_data(
            deployment=deployment,
            imports=imports,
            active=next((j for j in imports if j.is_active), None),
            form=kwargs.pop("form", None) or ProductionFileForm(),
            **kwargs,
        )

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        deployment = _deployment(self, pk)
        form = ProductionFileForm(request.POST, request.FILES)
        if not form.is_valid():
            return self.render_to_response(self.get_context_data(pk=pk, form=form))
        path = inventory_upload_store(upload=form.cleaned_data["file"])
        production_import_request(
            deployment=deployment,
            path=path,
            actor=request.user,
            create_values=form.cleaned_data["create_values"],
        )
        messages.success(request, f"Importing {path.name} …")
        return redirect("planner:deployment-production", pk=deployment.pk)


class DeploymentProductionProgress(JobProgressView):
    """The progress card of the deployment's running import (polled by its page)."""

    roles = MANAGERS
    scoped_model = Deployment
    template_name = "frontend/planner/_production_job.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        deployment = _deployment(self, kwargs["pk"])
        imports = _imports(deployment)
        return {"deployment": deployment, "job": imports[0] if imports else None}
