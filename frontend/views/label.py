"""Labelling pages: the annotators' queue and keyboard labelling page (with the player of the
episode's converted recording), the manager's job page (throughput, backlog, agreement,
exclusions), the review of disagreements, and exports."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Count, Q, QuerySet
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views import View
from django.views.generic import TemplateView

from accounts.models import Role
from accounts.permissions import LABELLERS
from frontend.views.base import MANAGERS, JobProgressView, MemberView
from labeling.exports.services import (
    ExportError,
    dataset_export_start,
    exclusion_lines,
    export_file,
)
from labeling.labels.selectors import (
    LabelSchema,
    assignment_page,
    episode_media,
    export_eligibility,
    job_stats,
    label_queue,
    label_schema,
    review_queue,
)
from labeling.labels.services import (
    LabelingError,
    annotation_submit,
    assignment_skip,
    label_job_create,
    label_job_update,
    label_next,
    review_resolve,
)
from labeling.models import (
    Dataset,
    DatasetExport,
    Episode,
    LabelAssignment,
    LabelJob,
)
from labeling.playback import Playback, episode_playback, playback_traces

MEDIA_READERS = frozenset({Role.MANAGER, Role.ANNOTATOR, Role.FIELD})


def _job_for(user: Any, pk: int) -> LabelJob:
    return get_object_or_404(LabelJob.objects.visible_to(user).select_related("dataset"), pk=pk)


# --- the queue ------------------------------------------------------------------------------------


class LabelQueue(MemberView, TemplateView):
    """Open label jobs with what is left and what this person has done; managers also see
    datasets captured by rounds that have no job yet."""

    roles = LABELLERS
    template_name = "frontend/label/queue.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        user = self.request.user
        jobs = (
            LabelJob.objects.visible_to(user)
            .select_related("dataset")
            .order_by("status", "-created_at", "-id")
        )
        rows = label_queue(jobs=jobs, user_id=self.membership.user_id)
        without_job: list[Dataset] = []
        if self.membership.role == Role.MANAGER:
            without_job = list(
                Dataset.objects.visible_to(user)
                .filter(
                    source__in=(Dataset.Source.CAPTURED, Dataset.Source.PRODUCTION),
                    label_job__isnull=True,
                )
                .annotate(n_episodes=Count("episodes"))
                .order_by("-updated_at")[:50]
            )
        return super().get_context_data(
            rows=rows,
            open_rows=[r for r in rows if r.job.status == LabelJob.Status.OPEN],
            closed_rows=[r for r in rows if r.job.status != LabelJob.Status.OPEN],
            without_job=without_job,
            **kwargs,
        )


class DatasetJobCreate(MemberView, View):
    """Create the label job of a dataset (managers)."""

    roles = MANAGERS
    scoped_model = Dataset

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        dataset = get_object_or_404(Dataset.objects.visible_to(request.user), pk=pk)
        try:
            # The job's defaults; its page changes overlap and gold shares afterwards.
            job = label_job_create(dataset=dataset, actor=request.user)
        except LabelingError as exc:
            messages.error(request, str(exc))
            existing = LabelJob.objects.filter(dataset=dataset).first()
            return redirect("label:job", pk=existing.pk) if existing else redirect("label:queue")
        messages.success(request, f"Label job created for {dataset.name}.")
        return redirect("label:job", pk=job.pk)


class JobNext(MemberView, View):
    """Claim the caller's next episode of a job and open it."""

    roles = LABELLERS
    scoped_model = LabelJob

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        job = _job_for(request.user, pk)
        return _go_next(request, job)


def _go_next(request: HttpRequest, job: LabelJob) -> HttpResponseRedirect:
    try:
        assignment = label_next(annotator=request.user, job=job)
    except LabelingError as exc:
        messages.error(request, str(exc))
        return redirect("label:queue")
    if assignment is None:
        messages.success(request, f"Nothing left for you in {job.dataset.name}. Thank you!")
        return redirect("label:queue")
    return redirect("label:assignment", pk=assignment.pk)


# --- labelling one episode ---------------------------------------------------------------------------


def _answer_from(post: Any, schema: LabelSchema) -> dict[str, Any]:
    return {
        "value_ids": [post.get(f"dim-{d.id}", "") for d in schema.dimensions],
        "outcome": post.get("outcome", ""),
        "failure_mode_id": post.get("failure_mode") or None,
        "notes": post.get("notes", ""),
        "flagged": post.get("flagged") in ("1", "on", "true"),
    }


def _seconds(raw: str | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


class AssignmentView(MemberView, TemplateView):
    """The labelling page: the player (cameras in sync, traces, capture report; player.js),
    metadata, capture validation, stored media, and the answer form, pre-filled with what the
    protocol intended. Keyboard: see label.js."""

    roles = LABELLERS
    scoped_model = LabelAssignment
    template_name = "frontend/label/assignment.html"

    def _assignment(self, pk: int) -> LabelAssignment:
        return get_object_or_404(
            LabelAssignment.objects.visible_to(self.request.user).select_related(
                "job", "job__dataset", "annotator"
            ),
            pk=pk,
        )

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        assignment = kwargs.pop("assignment", None) or self._assignment(kwargs["pk"])
        page = assignment_page(assignment=assignment)
        answer = kwargs.pop("answer", None)
        chosen = (
            page.schema.by_dimension(
                int(v) for v in (answer or {}).get("value_ids", []) if str(v).isdigit()
            )
            if answer
            else {d.id: page.prefill.get(d.label_name) for d in page.schema.dimensions}
        )
        outcome = (answer or {}).get("outcome") or page.prefill.get("outcome")
        mode = (answer or {}).get("failure_mode_id") or page.prefill.get("failure_mode")
        mine = assignment.annotator_id == self.request.user.pk
        return super().get_context_data(
            page=page,
            playback=episode_playback(page.episode),
            assignment=assignment,
            job=assignment.job,
            episode=page.episode,
            schema=page.schema,
            rows=[
                {
                    "dimension": d,
                    "chosen": chosen.get(d.id),
                    "intended": page.intended.get(d.label_name),
                    "values": [
                        {"value": v, "key": i + 1 if i < 9 else None}
                        for i, v in enumerate(d.values)
                    ],
                }
                for d in page.schema.dimensions
            ],
            outcome=outcome,
            failure_mode=str(mode) if mode else "",
            notes=(answer or {}).get("notes") or (page.annotation.notes if page.annotation else ""),
            flagged=(answer or {}).get("flagged")
            or (page.annotation.flagged if page.annotation else False),
            editable=mine and assignment.status == LabelAssignment.Status.ASSIGNED,
            outcomes=Episode.Outcome.choices,
            **kwargs,
        )

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        assignment = self._assignment(pk)
        schema = label_schema(job=assignment.job)
        answer = _answer_from(request.POST, schema)
        try:
            annotation_submit(
                assignment=assignment,
                actor=request.user,
                seconds_spent=_seconds(request.POST.get("seconds")),
                **answer,
            )
        except LabelingError as exc:
            messages.error(request, str(exc))
            context = self.get_context_data(pk=pk, assignment=assignment, answer=answer)
            return self.render_to_response(context, status=400)
        return _go_next(request, assignment.job)


class AssignmentSkip(MemberView, View):
    roles = LABELLERS
    scoped_model = LabelAssignment

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        assignment = get_object_or_404(
            LabelAssignment.objects.visible_to(request.user).select_related("job", "job__dataset"),
            pk=pk,
        )
        try:
            assignment_skip(assignment=assignment, actor=request.user)
        except LabelingError as exc:
            messages.error(request, str(exc))
            return redirect("label:assignment", pk=assignment.pk)
        return _go_next(request, assignment.job)


class EpisodeMediaAccess(MemberView, View):
    """The routes that serve what an episode recorded (stored media, the converted videos and
    their playback): one rule for who may fetch them."""

    roles = MEDIA_READERS
    scoped_model = Episode

    def episodes(self) -> QuerySet[Episode]:
        """Episodes whose media this member may fetch; any other id is a 404.

        Managers: any of the organization's. Annotators: those they hold an assignment for
        (the labelling page is the only page that shows media to them). Field members: those
        their own team's tasks captured (the capture record that created the episode, or a
        recording uploaded for the task).
        """
        from campaigns.models import FieldRecord, TaskRecording

        user = self.request.user
        episodes: QuerySet[Episode] = Episode.objects.visible_to(user)
        role = self.membership.role
        if role == Role.MANAGER:
            return episodes
        if role == Role.ANNOTATOR:
            return episodes.filter(
                pk__in=LabelAssignment.objects.filter(annotator_id=user.pk).values("episode_id")
            )
        if role == Role.FIELD:
            own_tasks = {"task__team__members": user.pk}
            captured = FieldRecord.objects.filter(episode__isnull=False, **own_tasks)
            recorded = TaskRecording.objects.filter(recording__episode__isnull=False, **own_tasks)
            return episodes.filter(
                Q(pk__in=captured.values("episode_id"))
                | Q(pk__in=recorded.values("recording__episode_id"))
            )
        return episodes.none()


class EpisodeMedia(EpisodeMediaAccess):
    """An episode's stored video or image (``?n=`` picks one of several), served by the app."""

    def get(self, request: HttpRequest, pk: int) -> FileResponse:
        episode = get_object_or_404(self.episodes(), pk=pk)
        media = episode_media(episode)
        try:
            index = int(request.GET.get("n", 0))
        except ValueError:
            index = -1
        if not 0 <= index < len(media):
            raise Http404("No such media for this episode.")
        item = media[index]
        response = FileResponse(item.path.open("rb"), content_type=item.content_type)
        response["Cache-Control"] = "private, max-age=3600"
        return response


# --- the player: the episode's converted recording ---------------------------------------------


def _video_version(path: Path) -> str:
    """Changes when the conversion does (its folder names the content and the settings)."""
    return hashlib.sha256(str(path.parent.parent).encode()).hexdigest()[:12]


def _playback_payload(playback: Playback, episode: Episode) -> dict[str, Any]:
    """What the player needs, as JSON."""
    recording = playback.recording
    data: dict[str, Any] = {
        "status": playback.status,
        "message": playback.message,
        "fps": playback.fps,
        "length": playback.length,
        "parts": playback.parts,
        "cameras": [],
        "joints": [],
        "traces": {},
        "report": playback.report,
        "recording": (
            {"name": recording.original_name, "status": recording.status} if recording else None
        ),
    }
    if playback.status == "ready":
        data["cameras"] = [
            {
                "key": c.key,
                "name": c.name,
                "url": reverse("label:episode-video", args=[episode.pk, c.key])
                + f"?v={_video_version(c.path)}",
                "width": c.width,
                "height": c.height,
            }
            for c in playback.cameras
        ]
        data["joints"] = playback.joints
        data["traces"] = playback_traces(playback)
    return data


class EpisodePlayback(EpisodeMediaAccess):
    """The player's data (status, cameras, traces, capture report); polled while converting,
    and asks for the conversion when it is missing."""

    def get(self, request: HttpRequest, pk: int) -> JsonResponse:
        episode = get_object_or_404(self.episodes().select_related("dataset"), pk=pk)
        playback = episode_playback(episode, request_conversion=True, actor=request.user)
        response = JsonResponse(_playback_payload(playback, episode))
        response["Cache-Control"] = "private, no-store"
        return response


RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CHUNK = 256 * 1024


class RangeNotSatisfiable(Exception):
    pass


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The byte range (first, last, inclusive) a ``Range`` header asks of ``size`` bytes, or
    None to send them all (no header, or one this server ignores: another unit, several
    ranges, a malformed one). Raises RangeNotSatisfiable when it asks for nothing there."""
    match = RANGE.match(header.replace(" ", ""))
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable
        return max(0, size - n), size - 1
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise RangeNotSatisfiable
    return start, min(int(last), size - 1) if last else size - 1


def _file_part(path: Path, start: int, length: int) -> Iterator[bytes]:
    with path.open("rb") as fh:
        fh.seek(start)
        left = length
        while left > 0:
            block = fh.read(min(CHUNK, left))
            if not block:
                return
            left -= len(block)
            yield block


class EpisodeVideo(EpisodeMediaAccess):
    """One camera's converted video, streamed with byte ranges (a ``<video>`` seeks with them)."""

    def get(self, request: HttpRequest, pk: int, camera: str) -> HttpResponseBase:
        episode = get_object_or_404(self.episodes().select_related("dataset"), pk=pk)
        playback = episode_playback(episode)
        found = next((c for c in playback.cameras if c.key == camera), None)
        if found is None or not found.path.is_file():
            raise Http404("This episode has no such video (yet).")
        stat = found.path.stat()
        size = stat.st_size
        etag = '"{}"'.format(
            hashlib.sha256(f"{found.path}:{size}:{stat.st_mtime_ns}".encode()).hexdigest()[:20]
        )
        header = request.headers.get("Range", "")
        if_range = request.headers.get("If-Range")
        try:
            wanted = byte_range(header, size) if if_range in (None, etag) else None
        except RangeNotSatisfiable:
            response: HttpResponseBase = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{size}"
        else:
            if wanted is None:
                response = FileResponse(found.path.open("rb"), content_type="video/mp4")
                response.block_size = CHUNK
            else:
                start, end = wanted
                response = StreamingHttpResponse(
                    _file_part(found.path, start, end - start + 1),
                    status=206,
                    content_type="video/mp4",
                )
                response["Content-Length"] = str(end - start + 1)
                response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Accept-Ranges"] = "bytes"
        response["ETag"] = etag
        response["Cache-Control"] = "private, max-age=86400"
        return response


# --- the job page (managers) ----------------------------------------------------------------------------


class JobSettingsForm(forms.Form):
    status = forms.ChoiceField(choices=LabelJob.Status.choices)
    overlap_share = forms.FloatField(min_value=0, max_value=1)
    annotators_per_overlap = forms.IntegerField(min_value=2, max_value=10)
    gold_share = forms.FloatField(min_value=0, max_value=1)
    accuracy_threshold = forms.FloatField(min_value=0, max_value=1)
    claim_minutes = forms.IntegerField(min_value=1)
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))


class JobDetail(MemberView, TemplateView):
    """Throughput, backlog, agreement per label and annotator, the review queue, and what
    does not export (and why)."""

    roles = MANAGERS
    scoped_model = LabelJob
    template_name = "frontend/label/job.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        job = _job_for(self.request.user, kwargs["pk"])
        stats = job_stats(job=job)
        exports = list(
            DatasetExport.objects.filter(dataset_id=job.dataset_id)
            .select_related("job")
            .order_by("-created_at", "-id")[:5]
        )
        form = JobSettingsForm(
            initial={
                "status": job.status,
                "overlap_share": job.overlap_share,
                "annotators_per_overlap": job.annotators_per_overlap,
                "gold_share": job.gold_share,
                "accuracy_threshold": job.accuracy_threshold,
                "claim_minutes": job.claim_minutes,
                "instructions": job.instructions,
            }
        )
        labels = stats.schema.labels
        return super().get_context_data(
            job=job,
            stats=stats,
            progress=stats.progress,
            annotators=[
                {
                    "row": a,
                    "days": [a.per_day.get(d, 0) for d in stats.days],
                    "kappas": [a.agreement.get(label) for label in labels],
                }
                for a in stats.annotators
            ],
            label_titles=[stats.schema.title(label) for label in labels],
            day_totals=[stats.per_day.get(d, 0) for d in stats.days],
            exports=exports,
            formats=DatasetExport.Format.choices,
            form=form,
            round=getattr(job.dataset, "collection_round", None),
            **kwargs,
        )


class JobSettings(MemberView, View):
    roles = MANAGERS
    scoped_model = LabelJob

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        job = _job_for(request.user, pk)
        form = JobSettingsForm(request.POST)
        if not form.is_valid():
            for field, errors in form.errors.items():
                messages.error(request, f"{field}: {' '.join(str(e) for e in errors)}")
            return redirect("label:job", pk=job.pk)
        try:
            label_job_update(job=job, actor=request.user, **form.cleaned_data)
        except LabelingError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Settings saved.")
        return redirect("label:job", pk=job.pk)


# --- review (managers) ----------------------------------------------------------------------------------


class JobReview(MemberView, TemplateView):
    """Disagreements side by side, each with a form to resolve it."""

    roles = MANAGERS
    scoped_model = LabelJob
    template_name = "frontend/label/review.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        job = _job_for(self.request.user, kwargs["pk"])
        schema = label_schema(job=job)
        total, cases = review_queue(job=job, schema=schema)
        return super().get_context_data(
            job=job,
            schema=schema,
            total=total,
            cases=[
                {
                    "case": c,
                    "cells": c.cells(schema),
                    "media": episode_media(c.episode),
                    "suggested": {d.id: c.suggestion.get(d.label_name) for d in schema.dimensions},
                    "outcome": c.suggestion.get("outcome"),
                    "failure_mode": c.suggestion.get("failure_mode"),
                }
                for c in cases
            ],
            outcomes=Episode.Outcome.choices,
            **kwargs,
        )


class EpisodeResolve(MemberView, View):
    """Accept an episode with resolved labels (optionally as gold) or reject it."""

    roles = MANAGERS
    scoped_model = Episode

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        episode = get_object_or_404(
            Episode.objects.visible_to(request.user).select_related("condition_set"), pk=pk
        )
        item_job = LabelJob.objects.filter(items__episode=episode).first()
        if item_job is None:
            raise Http404("This episode is in no label job.")
        schema = label_schema(job=item_job)
        decision = request.POST.get("decision", "")
        try:
            review_resolve(
                episode=episode,
                reviewer=request.user,
                decision="reject" if decision == "reject" else "accept" if decision else "",
                value_ids=[request.POST.get(f"dim-{d.id}", "") for d in schema.dimensions],
                outcome=request.POST.get("outcome", "unknown"),
                failure_mode_id=request.POST.get("failure_mode") or None,
                reason=request.POST.get("reason", ""),
                make_gold=decision == "gold",
            )
        except LabelingError as exc:
            messages.error(request, f"Episode {episode.key}: {exc}")
        else:
            verb = "rejected" if decision == "reject" else "accepted"
            messages.success(request, f"Episode {episode.key} {verb}.")
        return redirect("label:review", pk=item_job.pk)


# --- exports (managers) -----------------------------------------------------------------------------------


class DatasetExports(MemberView, TemplateView):
    """What of a dataset exports and why the rest does not; start an export; past exports."""

    roles = MANAGERS
    scoped_model = Dataset
    template_name = "frontend/label/exports.html"

    def _dataset(self, pk: int) -> Dataset:
        return get_object_or_404(Dataset.objects.visible_to(self.request.user), pk=pk)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        dataset = self._dataset(kwargs["pk"])
        exports = list(
            DatasetExport.objects.filter(dataset=dataset)
            .select_related("job", "created_by")
            .order_by("-created_at", "-id")[:20]
        )
        return super().get_context_data(
            dataset=dataset,
            lerobot=export_eligibility(dataset_id=dataset.pk, single_episodes_only=True),
            manifest=export_eligibility(dataset_id=dataset.pk),
            exports=exports,
            formats=DatasetExport.Format.choices,
            job=LabelJob.objects.filter(dataset=dataset).first(),
            **kwargs,
        )

    def post(self, request: HttpRequest, pk: int) -> HttpResponseRedirect:
        dataset = self._dataset(pk)
        try:
            export = dataset_export_start(
                dataset=dataset, format=request.POST.get("format", ""), actor=request.user
            )
        except ExportError as exc:
            messages.error(request, str(exc))
            return redirect("label:dataset-exports", pk=dataset.pk)
        return redirect("label:export", pk=export.pk)


def _export_for(user: Any, pk: int) -> DatasetExport:
    return get_object_or_404(
        DatasetExport.objects.visible_to(user).select_related("job", "dataset", "created_by"),
        pk=pk,
    )


class ExportDetail(MemberView, TemplateView):
    roles = MANAGERS
    scoped_model = DatasetExport
    template_name = "frontend/label/export_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        export = _export_for(self.request.user, kwargs["pk"])
        summary = export.summary or {}
        return super().get_context_data(
            export=export,
            job=export.job,
            summary=summary,
            exclusions=exclusion_lines(summary),
            **kwargs,
        )


class ExportProgress(JobProgressView):
    """The progress card of a running export (htmx partial); reloads the page when done."""

    roles = MANAGERS
    scoped_model = DatasetExport
    template_name = "frontend/label/_export_progress.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        export = _export_for(self.request.user, kwargs["pk"])
        return {"export": export, "job": export.job}


class ExportDownload(MemberView, View):
    roles = MANAGERS
    scoped_model = DatasetExport

    def get(self, request: HttpRequest, pk: int) -> HttpResponseBase:
        export = _export_for(request.user, pk)
        if export.job.status != "succeeded":
            messages.info(request, f"The export is {export.job.get_status_display().lower()}.")
            return redirect(reverse("label:export", args=[export.pk]))
        path = export_file(export)
        return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
