"""Gap report pages: summary, top gaps, cell table, heatmaps, per-dimension bars, comparison."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.urls import Resolver404, resolve
from django.views import View
from django.views.generic import TemplateView

from analytics import charts
from analytics.models import GapCell, GapReport
from analytics.selectors import (
    GapFilterInvalid,
    gap_cells,
    gap_compare,
    gap_heatmap,
    gap_report_dimensions,
    latest_curves,
)
from analytics.services.gap import gap_report_request
from campaigns.models import Campaign
from frontend.views.base import MANAGERS, JobProgressView, MemberView


def _report_context(report: GapReport) -> dict[str, Any]:
    summary = report.summary or {}
    bars = [
        {
            "id": f"bars-{i}",
            "figure": charts.dimension_bars(
                dimension=b["dimension"],
                values=b["values"],
                target=b["target"],
                training=b["training"],
                psi=b["psi"],
            ),
        }
        for i, b in enumerate(summary.get("bars", []))
    ]
    # A refit after the report (an evaluation imported since): the report's cells are not
    # read on it until a new report is computed.
    refit = latest_curves(campaign=report.campaign, dimension_slugs=report.dimension_slugs or [])
    used = (summary.get("curve") or {}).get("refit")
    return {
        "summary": summary,
        "bars": bars,
        "dims": gap_report_dimensions(report=report),
        "metrics": charts.METRICS,
        "newer_refit": refit if refit is not None and refit.pk != used else None,
    }


class CampaignGap(MemberView, TemplateView):
    """The campaign's latest finished report at once, plus any report still computing."""

    roles = MANAGERS
    scoped_model = Campaign
    template_name = "frontend/gap/report.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        campaign = get_object_or_404(
            Campaign.objects.visible_to(self.request.user), pk=kwargs["pk"]
        )
        reports = (
            GapReport.objects.filter(campaign=campaign)
            .select_related("job")
            .order_by("-created_at")
        )
        latest = reports.filter(status=GapReport.Status.DONE).order_by("-finished_at").first()
        pending = reports.filter(
            status__in=[GapReport.Status.PENDING, GapReport.Status.RUNNING]
        ).first()
        context = {
            "campaign": campaign,
            "report": latest,
            "pending": pending,
            "history": list(reports.filter(status=GapReport.Status.DONE)[:10]),
        }
        if latest is not None:
            context.update(_report_context(latest))
        return super().get_context_data(**context, **kwargs)


class GapReportDetail(MemberView, TemplateView):
    roles = MANAGERS
    scoped_model = GapReport
    template_name = "frontend/gap/report.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        report = get_object_or_404(
            GapReport.objects.visible_to(self.request.user).select_related("campaign", "job"),
            pk=kwargs["pk"],
        )
        history = list(
            GapReport.objects.filter(
                campaign=report.campaign, status=GapReport.Status.DONE
            ).order_by("-created_at")[:10]
        )
        context = {
            "campaign": report.campaign,
            "report": report if report.status == "done" else None,
            "pending": report if report.status in ("pending", "running") else None,
            "failed": report if report.status == "failed" else None,
            "history": history,
        }
        if report.status == GapReport.Status.DONE:
            context.update(_report_context(report))
        return super().get_context_data(**context, **kwargs)


class GapReportRequest(MemberView, View):
    roles = MANAGERS
    scoped_model = Campaign

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign.objects.visible_to(request.user), pk=pk)
        dims = [d for d in request.POST.getlist("dimensions") if d]
        report = gap_report_request(campaign=campaign, dimensions=dims or None, actor=request.user)
        messages.success(
            request,
            "A new gap report is computing; this page shows the latest finished one meanwhile.",
        )
        return redirect("planner:gap-report", pk=report.pk)

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        get_object_or_404(Campaign.objects.visible_to(request.user), pk=pk)
        return redirect("planner:campaign-gap", pk=pk)


class GapReportProgress(JobProgressView):
    roles = MANAGERS
    scoped_model = GapReport
    template_name = "frontend/gap/_progress.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        report = get_object_or_404(
            GapReport.objects.visible_to(self.request.user).select_related("job"), pk=kwargs["pk"]
        )
        return {"pending": report}

    def finished(self, context: dict[str, Any]) -> bool:
        return context["pending"].status in (GapReport.Status.DONE, GapReport.Status.FAILED)


class GapCells(MemberView, TemplateView):
    """The sortable, filterable cell table (an htmx partial, also a full page)."""

    roles = MANAGERS
    scoped_model = GapReport
    template_name = "frontend/gap/_cells.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        report = get_object_or_404(GapReport.objects.visible_to(self.request.user), pk=kwargs["pk"])
        params = self.request.GET
        error = None
        try:
            cells = gap_cells(
                report=report,
                coverage=params.get("coverage"),
                search=params.get("q"),
                value=params.get("value"),
                sort=params.get("sort", "rank"),
            )
        except GapFilterInvalid as exc:
            # Shown in the table's place with a 200, so that htmx swaps it in.
            error, cells = str(exc), GapCell.objects.none()
        page = Paginator(cells, 50).get_page(params.get("page"))
        query = params.copy()
        query.pop("page", None)
        return super().get_context_data(
            report=report,
            page=page,
            sort=params.get("sort", "rank"),
            query=query.urlencode(),
            error=error,
            **kwargs,
        )

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        response = super().render_to_response(context, **kwargs)
        page_url = _report_page_url(self.request)
        if page_url is not None:
            # The filter lives in the report page's address, so a reload or a shared link
            # shows the same cells; replaced, not pushed: typing is not a trail of pages.
            response["HX-Replace-Url"] = page_url
        return response


REPORT_PAGES = frozenset({"campaign-gap", "gap-report"})


def _report_page_url(request: HttpRequest) -> str | None:
    """The report page the table sits in, with the table's filter as its query string."""
    htmx = getattr(request, "htmx", None)
    current = htmx.current_url if htmx else None
    if not current:
        return None
    path = urlsplit(current).path
    try:
        match = resolve(path)
    except Resolver404:
        return None
    if match.namespace != "planner" or match.url_name not in REPORT_PAGES:
        return None
    query = QueryDict(mutable=True)
    for key, values in request.GET.lists():
        kept = [v for v in values if v]
        if kept:
            query.setlist(key, kept)
    return f"{path}?{query.urlencode()}" if query else path


class GapHeatmap(MemberView, View):
    roles = MANAGERS
    scoped_model = GapReport

    def get(self, request: HttpRequest, pk: int) -> JsonResponse:
        report = get_object_or_404(GapReport.objects.visible_to(request.user), pk=pk)
        dims = report.dimension_slugs or []
        x = request.GET.get("x") or (dims[0] if dims else "")
        y = request.GET.get("y") or (dims[1] if len(dims) > 1 else x)
        if x == y:
            # Rows and columns of the same dimension fill only the diagonal: show the next
            # dimension as rows instead, or one row of all cells when there is none.
            y = next((d for d in dims if d != x), "")
        return JsonResponse(
            gap_heatmap(report=report, x=x, y=y, metric=request.GET.get("metric", "target_share"))
        )


class GapCompare(MemberView, TemplateView):
    roles = MANAGERS
    scoped_model = GapReport
    template_name = "frontend/gap/compare.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        visible = GapReport.objects.visible_to(self.request.user).filter(
            status=GapReport.Status.DONE
        )
        later = get_object_or_404(visible.select_related("campaign"), pk=kwargs["pk"])
        other = self.request.GET.get("with")
        earlier_qs = visible.filter(campaign=later.campaign).exclude(pk=later.pk)
        earlier = (
            get_object_or_404(earlier_qs, pk=other)
            if other and other.isdigit()
            else earlier_qs.filter(created_at__lt=later.created_at).order_by("-created_at").first()
        )
        context: dict[str, Any] = {
            "later": later,
            "earlier": earlier,
            "campaign": later.campaign,
            "choices": list(earlier_qs.order_by("-created_at")[:20]),
        }
        if earlier is not None:
            comparison = gap_compare(earlier=earlier, later=later)
            context.update(comparison=comparison, figure_json=json.dumps(comparison["figure"]))
        return super().get_context_data(**context, **kwargs)
