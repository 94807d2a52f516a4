"""The field surface: the offline tablet app, its service worker, setup photos, and the
manager's live view of a round's capture progress."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views import View
from django.views.generic import TemplateView

from accounts.models import Role
from accounts.permissions import FIELD_ROLES
from campaigns.field.selectors import (
    FIELD_STATUSES,
    SYNC_DAYS_AHEAD,
    SYNC_DAYS_BACK,
    round_progress,
)
from campaigns.models import CollectionRound, CollectionTask, FieldRecord, FieldTeam
from frontend.views.base import MANAGERS, MemberView
from labeling.recording_services import MAX_CHUNK_BYTES

# Everything the tablet needs to start offline. The service worker precaches these under a
# cache name derived from their content, so a deploy replaces the whole set at once.
FIELD_ASSETS = (
    "frontend/app.css",
    "frontend/field/field.css",
    "frontend/field/store.js",
    "frontend/field/sync.js",
    "frontend/field/app.js",
    "frontend/field/manifest.json",
    "frontend/field/icon-192.png",
    "frontend/field/icon-512.png",
)
# Bytes per PUT of a recording upload: small enough to resend cheaply on a poor link.
UPLOAD_CHUNK_BYTES = 4 * 1024**2


class FieldToday(MemberView, TemplateView):
    """The tablet app's shell: today's and upcoming tasks, rendered here for the first paint;
    the scripts take over from there and work from IndexedDB, online or not."""

    roles = FIELD_ROLES
    template_name = "frontend/field/app.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        today = timezone.localdate()
        tasks = list(
            CollectionTask.objects.visible_to(self.request.user)
            .filter(
                status__in=FIELD_STATUSES,
                scheduled_date__gte=today - timedelta(days=SYNC_DAYS_BACK),
                scheduled_date__lte=today + timedelta(days=SYNC_DAYS_AHEAD),
            )
            .select_related("site", "round__campaign", "embodiment")
            .order_by("scheduled_date", "start_at", "id")[:100]
        )
        return super().get_context_data(
            today=today,
            todays=[t for t in tasks if t.scheduled_date == today],
            upcoming=[t for t in tasks if t.scheduled_date and t.scheduled_date > today],
            teams=list(FieldTeam.objects.filter(members=self.request.user.pk)),
            upload_chunk=min(
                getattr(settings, "FIELDCRAFT_UPLOAD_CHUNK_BYTES", UPLOAD_CHUNK_BYTES),
                MAX_CHUNK_BYTES,
            ),
            **kwargs,
        )


def _assets_version(urls: list[str]) -> str:
    digest = hashlib.sha256()
    for path, url in zip(FIELD_ASSETS, urls, strict=True):
        digest.update(url.encode())
        found = finders.find(path)
        if isinstance(found, str):
            with open(found, "rb") as handle:
                digest.update(handle.read())
    digest.update(render_to_string("frontend/field/sw.js", {"config": "{}"}).encode())
    return digest.hexdigest()[:16]


class FieldServiceWorker(MemberView, View):
    """The service worker, served from /field/ so that its scope covers the field pages."""

    roles = FIELD_ROLES

    def get(self, request: HttpRequest) -> HttpResponse:
        urls = [static(path) for path in FIELD_ASSETS]
        body = render_to_string(
            "frontend/field/sw.js",
            {
                # Our own static URLs and route paths, JSON-encoded for the script.
                "config": mark_safe(  # noqa: S308
                    json.dumps(
                        {
                            "version": _assets_version(urls),
                            "assets": urls,
                            "shell": reverse("field:today"),
                            "tasksApi": reverse("field-task-list"),
                        }
                    )
                ),
            },
        )
        response = HttpResponse(body, content_type="text/javascript; charset=utf-8")
        response["Service-Worker-Allowed"] = reverse("field:today")
        response["Cache-Control"] = "no-cache"
        return response


class FieldTaskPhotos(MemberView, View):
    """A task's setup photos; ``?record=<uuid>`` streams one image to members who may see it."""

    roles = FIELD_ROLES
    scoped_model = CollectionTask

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        task = get_object_or_404(
            CollectionTask.objects.visible_to(request.user).select_related("site", "round"),
            pk=kwargs["pk"],
        )
        photos = FieldRecord.objects.filter(task=task, kind=FieldRecord.Kind.PHOTO).exclude(
            photo=""
        )
        wanted = request.GET.get("record")
        if wanted:
            record = photos.filter(uuid=_uuid_or_404(wanted)).first()
            if record is None:
                raise Http404("No such photo.")
            response = FileResponse(
                record.photo.open("rb"),
                content_type=record.payload.get("content_type") or "application/octet-stream",
            )
            response["Cache-Control"] = "private, max-age=86400"
            return response
        return render(
            request,
            "frontend/field/photos.html",
            {
                "task": task,
                "photos": list(photos.select_related("author").order_by("-received_at")),
            },
        )


def _uuid_or_404(value: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise Http404("No such photo.") from None


class RoundProgress(MemberView, TemplateView):
    """Captured vs wanted per target and per task, blockers and stale records; htmx polls it."""

    roles = MANAGERS
    scoped_model = CollectionRound
    template_name = "frontend/field/progress.html"

    def get_template_names(self) -> list[str]:
        if getattr(self.request, "htmx", False):
            return ["frontend/field/_progress.html"]
        return [self.template_name]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(self.request.user).select_related("campaign"),
            pk=kwargs["pk"],
        )
        return super().get_context_data(
            round=round, campaign=round.campaign, progress=round_progress(round=round), **kwargs
        )


class TaskTakesMatch(MemberView, View):
    """A manager matches a task's takes to one of its recordings again, with a given offset."""

    roles = MANAGERS
    scoped_model = CollectionTask

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        from django.contrib import messages
        from django.shortcuts import redirect

        from campaigns.models import TaskRecording
        from campaigns.takes import recording_takes_match

        task = get_object_or_404(
            CollectionTask.objects.visible_to(request.user).select_related(
                "embodiment", "round__campaign"
            ),
            pk=pk,
        )
        raw = str(request.POST.get("recording", ""))
        link = (
            TaskRecording.objects.filter(task=task, recording_id=int(raw))
            .select_related("recording")
            .first()
            if raw.isdigit()
            else None
        )
        if link is None:
            messages.error(request, "recording: choose one of this task's recordings.")
            return redirect(reverse("planner:round-progress", args=[task.round_id]) + "#takes")
        try:
            offset = float(request.POST.get("offset_ms", ""))
        except ValueError:
            offset = float("nan")
        if not -86_400_000 <= offset <= 86_400_000:
            messages.error(
                request, "offset_ms: expected the tablet − robot clock offset in milliseconds."
            )
            return redirect(reverse("planner:round-progress", args=[task.round_id]) + "#takes")
        result = recording_takes_match(
            task=task, recording=link.recording, offset_ms=offset, actor=request.user
        )
        messages.success(
            request,
            f"{len(result.matched)} take(s) found in {link.recording.original_name}, "
            f"{len(result.unmatched)} still outside it.",
        )
        return redirect(reverse("planner:round-progress", args=[task.round_id]) + "#takes")


class FieldTaskCaptures(MemberView, TemplateView):
    """The capture report of a task, readable by a field lead on a tablet."""

    roles = frozenset({Role.FIELD, Role.MANAGER})
    scoped_model = CollectionTask
    template_name = "frontend/field/captures.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from campaigns.models import TaskRecording

        task = get_object_or_404(
            CollectionTask.objects.visible_to(self.request.user).select_related(
                "site", "embodiment", "round"
            ),
            pk=kwargs["pk"],
        )
        links = list(
            TaskRecording.objects.filter(task=task)
            .select_related("recording")
            .order_by("-created_at")
        )
        rows = []
        for link in links:
            report = link.recording.report or {}
            rows.append(
                {
                    "link": link,
                    "recording": link.recording,
                    "failed": [c for c in report.get("checks", []) if not c.get("passed")],
                    "passed": [c for c in report.get("checks", []) if c.get("passed")],
                    "topics": report.get("topics", []),
                }
            )
        return super().get_context_data(task=task, rows=rows, **kwargs)
