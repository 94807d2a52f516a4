"""Inventory pages for managers: imports (upload, progress, problems) and datasets."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views import View
from django.views.generic import TemplateView

from accounts.models import Job
from frontend.views.base import MANAGERS, JobProgressView, MemberView
from labeling.importers.errors import ImportFailed
from labeling.importers.sources import FORMATS
from labeling.models import Dataset, InventoryImport
from labeling.selectors import dataset_breakdown, datasets_with_totals
from labeling.services import (
    inventory_import_cancel,
    inventory_import_start,
    inventory_upload_discard,
    inventory_upload_store,
)
from sites.models import Embodiment, Site

RECENT_IMPORTS = 50

# The import command's options as the importer's messages name them -> the form field a person
# uses here (ImportForm's labels; a test checks every option of the command is covered).
CLI_OPTION_FIELDS = {
    "create-values": "Create missing condition values",
    "set": "Condition values for every episode",
    "map": "Column mapping",
    "embodiment": "Embodiment",
    "site": "Site",
    "format": "Format",
    "dataset": "Dataset",
}
WEB_WORDING: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"\bpass --create-values\b"), "tick “Create missing condition values”"),
    (re.compile(rf"\bgive --format ({'|'.join(FORMATS)})\b"), r"choose \1 as the “Format”"),
    (re.compile(r"\bgive --format\b"), "choose a “Format”"),
    (
        re.compile(r"--(" + "|".join(map(re.escape, CLI_OPTION_FIELDS)) + r")\b"),
        lambda m: f"“{CLI_OPTION_FIELDS[m.group(1)]}”",
    ),
]


class ImportForm(forms.Form):
    file = forms.FileField(
        help_text="A CSV, TSV or Parquet manifest, or a LeRobot dataset as .zip / .tar.gz."
    )
    dataset = forms.CharField(max_length=200, help_text="Created if new; re-importing updates it.")
    format = forms.ChoiceField(choices=[("", "Detect")] + [(f, f) for f in FORMATS], required=False)
    mapping = forms.CharField(
        label="Column mapping",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "# Episodes=count\nDataset=key"}),
        help_text="One COLUMN=TARGET per line (key, count, frames, duration_s, fps, outcome, "
        "task, site, embodiment, storage_uri, recorded_at, feature:NAME, extra:NAME, ignore, "
        "or a condition dimension). Empty: columns named like a field or dimension are used.",
    )
    sets = forms.CharField(
        label="Condition values for every episode",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "lighting=fluorescent"}),
        help_text="One DIMENSION=VALUE per line, for every episode (values in the data win).",
    )
    create_values = forms.BooleanField(
        label="Create missing condition values",
        required=False,
        help_text="Add values the file names but the taxonomy lacks, instead of failing.",
    )
    embodiment = forms.ChoiceField(required=False)
    site = forms.ChoiceField(required=False)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        embodiments = Embodiment.objects.visible_to(user).order_by("name")
        sites = Site.objects.visible_to(user).order_by("name")
        embodiment_field = self.fields["embodiment"]
        site_field = self.fields["site"]
        assert isinstance(embodiment_field, forms.ChoiceField)
        assert isinstance(site_field, forms.ChoiceField)
        embodiment_field.choices = [("", "—")] + [(e.slug, e.name) for e in embodiments]
        site_field.choices = [("", "—")] + [(s.slug, s.name) for s in sites]

    @classmethod
    def wording(cls, text: str) -> str:
        """Say an importer's message in this form's words: the importer names its options as
        the command line spells them (``pass --create-values``), a person here sees fields."""
        for pattern, replacement in WEB_WORDING:
            text = pattern.sub(replacement, text)
        return text

    @staticmethod
    def lines(text: str) -> list[str]:
        return [
            line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
        ]


class InventoryHome(MemberView, TemplateView):
    """Imports with status and progress, and the upload form."""

    roles = MANAGERS
    template_name = "frontend/inventory/home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        imports = _recent_imports(self.request.user)
        kwargs.setdefault("form", ImportForm(user=self.request.user))
        return super().get_context_data(
            imports=imports,
            active=any(i.job.is_active for i in imports),
            n_datasets=Dataset.objects.visible_to(self.request.user).count(),
            **kwargs,
        )

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        form = ImportForm(request.POST, request.FILES, user=request.user)
        if not form.is_valid():
            return self.render_to_response(self.get_context_data(form=form))
        data = form.cleaned_data
        path = inventory_upload_store(upload=data["file"])
        try:
            record = inventory_import_start(
                organization=self.membership.organization,
                dataset_name=data["dataset"],
                path=path,
                source_name=data["file"].name,
                format=data["format"] or None,
                mapping=form.lines(data["mapping"]),
                sets=form.lines(data["sets"]),
                create_values=data["create_values"],
                embodiment=data["embodiment"] or None,
                site=data["site"] or None,
                created_by=request.user,
            )
        except ImportFailed as exc:
            inventory_upload_discard(path=path)
            for problem in exc.problems:
                form.add_error(None, form.wording(str(problem)))
            return self.render_to_response(self.get_context_data(form=form))
        messages.success(request, f"Import of {record.source_name} queued.")
        return redirect("inventory:import", pk=record.pk)


def _recent_imports(user: Any) -> list[InventoryImport]:
    return list(
        InventoryImport.objects.visible_to(user)
        .select_related("job", "dataset", "created_by")
        .order_by("-created_at")[:RECENT_IMPORTS]
    )


class ImportRows(MemberView, TemplateView):
    """The imports table (an htmx partial that polls itself while an import is active)."""

    roles = MANAGERS
    template_name = "frontend/inventory/_import_rows.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        imports = _recent_imports(self.request.user)
        return super().get_context_data(
            imports=imports, active=any(i.job.is_active for i in imports), **kwargs
        )


def _import_for(user: Any, pk: int) -> InventoryImport:
    return get_object_or_404(
        InventoryImport.objects.visible_to(user).select_related("job", "dataset", "created_by"),
        pk=pk,
    )


class ImportDetail(MemberView, TemplateView):
    """One import: progress while it runs, then its summary or its problems."""

    roles = MANAGERS
    scoped_model = InventoryImport
    template_name = "frontend/inventory/import_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        record = _import_for(self.request.user, kwargs["pk"])
        summary = dict(record.summary or {})
        if summary.get("warnings"):
            summary["warnings"] = [ImportForm.wording(str(w)) for w in summary["warnings"]]
        problems = [
            {**p, "message": ImportForm.wording(str(p.get("message", "")))}
            for p in record.job.errors or []
            if isinstance(p, dict)
        ]
        return super().get_context_data(
            record=record,
            job=record.job,
            job_message=ImportForm.wording(record.job.message),
            summary=summary,
            problems=problems,
            problems_total=summary.get("problems_total") or len(record.job.errors or []),
            conditions=[c for c in summary.get("conditions", []) if c.get("values")],
            **kwargs,
        )


class ImportProgress(JobProgressView):
    """The progress card of a running import (htmx partial); reloads the page when done."""

    roles = MANAGERS
    scoped_model = InventoryImport
    template_name = "frontend/inventory/_progress.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        record = _import_for(self.request.user, kwargs["pk"])
        return {
            "record": record,
            "job": record.job,
            "job_message": ImportForm.wording(record.job.message),
        }


class ImportCancel(MemberView, View):
    roles = MANAGERS
    scoped_model = InventoryImport

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        record = _import_for(request.user, pk)
        inventory_import_cancel(inventory_import=record)
        messages.info(request, "Cancelling: nothing from this import will be written.")
        return redirect(reverse("inventory:import", args=[record.pk]))


class DatasetList(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/inventory/dataset_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        datasets = list(
            datasets_with_totals(Dataset.objects.visible_to(self.request.user)).order_by("name")
        )
        return super().get_context_data(datasets=datasets, **kwargs)


class DatasetDetail(MemberView, TemplateView):
    """A dataset's episodes per condition value (per dimension) and per site."""

    roles = MANAGERS
    scoped_model = Dataset
    template_name = "frontend/inventory/dataset_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        dataset = get_object_or_404(
            Dataset.objects.visible_to(self.request.user).select_related("embodiment"),
            pk=kwargs["pk"],
        )
        breakdown = dataset_breakdown(dataset_id=dataset.pk)
        imports = list(
            dataset.imports.select_related("job").order_by("-created_at")[:10]  # type: ignore[attr-defined]
        )
        return super().get_context_data(
            dataset=dataset,
            totals=breakdown.totals,
            dimensions=breakdown.dimensions,
            sites=breakdown.sites,
            imports=imports,
            statuses=Job.Status,
            **kwargs,
        )
