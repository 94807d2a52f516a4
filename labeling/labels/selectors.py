"""Reads for labelling: the label schema of a job, a job's progress and agreement, the review
queue, what an annotator sees on one episode, and why episodes do not export.

Every selector runs a fixed number of queries whatever the number of episodes, annotators
or annotations (the pages assert it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Aggregate, Count, F, FloatField, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from labeling.labels.agreement import (
    Accuracy,
    Label,
    LabelAgreement,
    PairAgreement,
    Rating,
    gold_accuracy,
    job_agreement,
    rater_agreement,
)
from labeling.models import (
    Annotation,
    Episode,
    GoldLabel,
    LabelAssignment,
    LabelItem,
    LabelJob,
    Recording,
)
from sites.models import ConditionDimension, FailureMode

OUTCOME = "outcome"
FAILURE_MODE = "failure_mode"
PENDING = (Episode.LabelStatus.UNLABELLED, Episode.LabelStatus.IN_PROGRESS)
VIDEO_SUFFIXES = {".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime"}
IMAGE_SUFFIXES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
}


# --- the label schema ---------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaValue:
    id: int
    slug: str
    label: str


@dataclass(frozen=True)
class SchemaDimension:
    id: int
    slug: str
    name: str
    values: tuple[SchemaValue, ...]

    @property
    def label_name(self) -> str:
        return f"condition:{self.slug}"


@dataclass(frozen=True)
class FailureModeOption:
    id: int
    code: str
    name: str
    level: int


@dataclass
class LabelSchema:
    """What a job labels: its condition dimensions with their values, outcome, failure mode."""

    dimensions: list[SchemaDimension]
    failure_modes: list[FailureModeOption]
    value_dimension: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.value_dimension = {v.id: d.id for d in self.dimensions for v in d.values}

    @property
    def dimension_ids(self) -> list[int]:
        return [d.id for d in self.dimensions]

    @property
    def labels(self) -> list[str]:
        return [d.label_name for d in self.dimensions] + [OUTCOME, FAILURE_MODE]

    def title(self, label: str) -> str:
        for d in self.dimensions:
            if d.label_name == label:
                return d.name
        return {OUTCOME: "Outcome", FAILURE_MODE: "Failure mode"}.get(label, label)

    def by_dimension(self, value_ids: Iterable[int]) -> dict[int, int]:
        """{dimension id: value id} for the values this schema knows (others are dropped)."""
        return {self.value_dimension[v]: v for v in value_ids if v in self.value_dimension}

    def vector(
        self, value_ids: Iterable[int], outcome: str, failure_mode_id: int | None
    ) -> dict[str, Label]:
        """One answer as label name → value (None: not present / not given)."""
        chosen = self.by_dimension(value_ids)
        out: dict[str, Label] = {d.label_name: chosen.get(d.id) for d in self.dimensions}
        out[OUTCOME] = outcome
        out[FAILURE_MODE] = failure_mode_id if outcome == Episode.Outcome.FAILURE else None
        return out

    def describe(self, label: str, value: Label) -> str:
        """A value as a person reads it."""
        if value is None:
            return "—"
        if label == OUTCOME:
            return (
                str(Episode.Outcome(value).label) if value in Episode.Outcome.values else str(value)
            )
        if label == FAILURE_MODE:
            mode = next((m for m in self.failure_modes if m.id == value), None)
            return mode.name if mode else str(value)
        for d in self.dimensions:
            if d.label_name == label:
                found = next((v for v in d.values if v.id == value), None)
                return found.label if found else str(value)
        return str(value)


def job_dimensions(*, job: LabelJob) -> list[ConditionDimension]:
    """The job's dimensions (all of the organization's when it names none), in taxonomy order."""
    qs = ConditionDimension.objects.filter(organization_id=job.organization_id)
    if job.dimensions:
        qs = qs.filter(pk__in=job.dimensions)
    return list(qs.prefetch_related("values").order_by("order", "name"))


def label_schema(*, job: LabelJob) -> LabelSchema:
    """The job's label schema (three queries)."""
    dims = [
        SchemaDimension(
            id=d.pk,
            slug=d.slug,
            name=d.name,
            values=tuple(
                SchemaValue(id=v.pk, slug=v.slug, label=v.label)
                for v in sorted(d.values.all(), key=lambda v: (v.order, v.label))
            ),
        )
        for d in job_dimensions(job=job)
    ]
    modes = [
        FailureModeOption(id=m.pk, code=m.code, name=m.name, level=m.level)
        for m in FailureMode.objects.filter(organization_id=job.organization_id).order_by("code")
    ]
    return LabelSchema(dimensions=dims, failure_modes=modes)


# --- export eligibility (sync QA) -----------------------------------------------------------


@dataclass(frozen=True)
class Exclusion:
    reason: str
    text: str
    rows: int
    episodes: int


@dataclass
class Eligibility:
    """What of a dataset exports (synchronised and accepted) and why the rest does not.

    An excluded episode may have several reasons (out of sync *and* unlabelled); each reason
    counts it, so the reasons can add up to more than ``excluded_rows``.
    """

    rows: int
    episodes: int
    frames: int
    excluded_rows: int
    excluded_episodes: int
    reasons: list[Exclusion]

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "episodes": self.episodes,
            "frames": self.frames,
            "excluded_rows": self.excluded_rows,
            "excluded_episodes": self.excluded_episodes,
            "reasons": [
                {"reason": r.reason, "text": r.text, "rows": r.rows, "episodes": r.episodes}
                for r in self.reasons
            ],
        }


SYNC_REASONS: dict[str, tuple[str, str]] = {
    Episode.SyncStatus.UNKNOWN: ("sync_unknown", "synchronisation not validated"),
    Episode.SyncStatus.DESYNCED: ("desynced", "out of sync"),
    Episode.SyncStatus.INCOMPLETE: ("incomplete", "incomplete recording"),
}
LABEL_REASONS: dict[str, tuple[str, str]] = {
    Episode.LabelStatus.UNLABELLED: ("unlabelled", "not labelled"),
    Episode.LabelStatus.IN_PROGRESS: ("labelling", "being labelled"),
    Episode.LabelStatus.LABELLED: ("in_review", "awaiting review"),
    Episode.LabelStatus.REJECTED: ("rejected", "rejected in review"),
}
SUMMARY_ROW = ("summary_row", "a row standing for several episodes (not one LeRobot episode)")


def export_eligibility(*, dataset_id: int, single_episodes_only: bool = False) -> Eligibility:
    """Count what exports and the reasons for what does not (one grouped query).

    ``single_episodes_only`` (LeRobot layouts) also excludes rows standing for several
    episodes: they are summaries, not episodes a model can load.
    """
    groups = (
        Episode.objects.filter(dataset_id=dataset_id)
        .values("sync_status", "label_status")
        .annotate(
            n_rows=Count("id"),
            n_episodes=Sum("episode_count"),
            n_frames=Sum("frames"),
            summary_rows=Count("id", filter=Q(episode_count__gt=1)),
            summary_episodes=Sum("episode_count", filter=Q(episode_count__gt=1)),
            summary_frames=Sum("frames", filter=Q(episode_count__gt=1)),
        )
        .order_by()
    )
    rows = episodes = frames = ex_rows = ex_episodes = 0
    reasons: dict[tuple[str, str], list[int]] = {}

    def add(reason: tuple[str, str], n_rows: int, n_episodes: int) -> None:
        tally = reasons.setdefault(reason, [0, 0])
        tally[0] += n_rows
        tally[1] += n_episodes

    for g in groups:
        n_rows, n_eps, n_frames = g["n_rows"], g["n_episodes"] or 0, g["n_frames"] or 0
        s_rows, s_eps = g["summary_rows"], g["summary_episodes"] or 0
        good_sync = g["sync_status"] == Episode.SyncStatus.SYNCED
        good_label = g["label_status"] == Episode.LabelStatus.ACCEPTED
        if not good_sync:
            add(SYNC_REASONS.get(g["sync_status"], ("sync_other", g["sync_status"])), n_rows, n_eps)
        if not good_label:
            add(
                LABEL_REASONS.get(g["label_status"], ("label_other", g["label_status"])),
                n_rows,
                n_eps,
            )
        if single_episodes_only and s_rows:
            add(SUMMARY_ROW, s_rows, s_eps)
        if good_sync and good_label:
            kept_rows = n_rows - (s_rows if single_episodes_only else 0)
            kept_eps = n_eps - (s_eps if single_episodes_only else 0)
            kept_frames = n_frames - ((g["summary_frames"] or 0) if single_episodes_only else 0)
            rows, episodes, frames = rows + kept_rows, episodes + kept_eps, frames + kept_frames
            ex_rows += n_rows - kept_rows
            ex_episodes += n_eps - kept_eps
        else:
            ex_rows += n_rows
            ex_episodes += n_eps
    order = [r for r, _ in (*SYNC_REASONS.values(), *LABEL_REASONS.values(), SUMMARY_ROW)]
    listed = sorted(
        reasons.items(), key=lambda kv: order.index(kv[0][0]) if kv[0][0] in order else 99
    )
    return Eligibility(
        rows=rows,
        episodes=episodes,
        frames=frames,
        excluded_rows=ex_rows,
        excluded_episodes=ex_episodes,
        reasons=[Exclusion(code, text, n[0], n[1]) for (code, text), n in listed],
    )


# --- a job's numbers ------------------------------------------------------------------------


@dataclass
class JobProgress:
    items: int
    gold: int
    overlapped: int
    unlabelled: int
    in_progress: int
    in_review: int
    accepted: int
    rejected: int
    annotations: int

    @property
    def backlog(self) -> int:
        return self.unlabelled + self.in_progress

    @property
    def done_share(self) -> float | None:
        return (self.accepted + self.rejected) / self.items if self.items else None


@dataclass
class AnnotatorRow:
    user_id: int
    name: str
    done: int = 0
    skipped: int = 0
    open: int = 0
    median_seconds: float | None = None
    per_day: dict[date, int] = field(default_factory=dict)
    gold: dict[str, Accuracy] = field(default_factory=dict)
    agreement: dict[str, PairAgreement] = field(default_factory=dict)

    @property
    def gold_accuracy(self) -> float | None:
        overall = self.gold.get("*")
        return overall.share if overall else None


@dataclass
class AgreementRow:
    label: str
    title: str
    result: LabelAgreement


@dataclass
class JobStats:
    job: LabelJob
    schema: LabelSchema
    progress: JobProgress
    days: list[date]
    per_day: dict[date, int]
    annotators: list[AnnotatorRow]
    agreement: list[AgreementRow]
    eligibility: Eligibility


def _person(first: str, last: str, username: str) -> str:
    return f"{first} {last}".strip() or username


def job_progress(*, job: LabelJob) -> JobProgress:
    """Items of the job by the label status of their episode (one query) and annotations."""
    s = Episode.LabelStatus
    row = LabelItem.objects.filter(job=job).aggregate(
        items=Count("id"),
        gold=Count("id", filter=Q(is_gold=True)),
        overlapped=Count("id", filter=Q(required__gt=1, is_gold=False)),
        unlabelled=Count("id", filter=Q(episode__label_status=s.UNLABELLED)),
        in_progress=Count("id", filter=Q(episode__label_status=s.IN_PROGRESS)),
        in_review=Count("id", filter=Q(episode__label_status=s.LABELLED)),
        accepted=Count("id", filter=Q(episode__label_status=s.ACCEPTED)),
        rejected=Count("id", filter=Q(episode__label_status=s.REJECTED)),
    )
    annotations = Annotation.objects.filter(assignment__job=job).count()
    return JobProgress(annotations=annotations, **row)


class _Median(Aggregate):
    """The median (interpolated, as statistics.median), computed in PostgreSQL."""

    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def job_ratings(
    *, job: LabelJob, schema: LabelSchema
) -> tuple[list[Rating], dict[int, dict[str, Label]], set[int]]:
    """The annotations that agreement and gold accuracy can use, as Ratings (oldest first):
    those on episodes several annotators label or with gold labels (single-labelled
    episodes never pair up, so a job's bulk is left in the database); the gold labels by
    episode, and which episodes are gold items."""
    rows = (
        Annotation.objects.filter(assignment__job=job)
        .filter(
            Q(assignment__item__required__gt=1)
            | Q(assignment__item__is_gold=True)
            | Q(episode__gold_label__isnull=False)
        )
        .order_by("id")
        .values_list(
            "episode_id",
            "annotator_id",
            "value_ids",
            "outcome",
            "failure_mode_id",
            "assignment__item__is_gold",
        )
    )
    ratings: list[Rating] = []
    gold_items: set[int] = set()
    for episode_id, annotator_id, value_ids, outcome, mode_id, is_gold in rows:
        ratings.append(
            Rating(
                item=episode_id,
                rater=annotator_id,
                labels=schema.vector(value_ids, outcome, mode_id),
            )
        )
        if is_gold:
            gold_items.add(episode_id)
    gold = {
        g.episode_id: schema.vector(g.value_ids, g.outcome, g.failure_mode_id)
        for g in GoldLabel.objects.filter(episode__label_item__job=job)
    }
    return ratings, gold, gold_items


def job_stats(*, job: LabelJob, days: int = 7) -> JobStats:
    """Progress, throughput per day and annotator, agreement per label, gold accuracy and
    export exclusions of one job (a fixed number of queries)."""
    schema = label_schema(job=job)
    progress = job_progress(job=job)
    today = timezone.localdate()
    day_list = [today - timedelta(days=i) for i in range(days - 1, -1, -1)]
    since = timezone.now() - timedelta(days=days)

    people: dict[int, AnnotatorRow] = {}
    per_status = (
        LabelAssignment.objects.filter(job=job)
        .values(
            "annotator_id",
            "annotator__username",
            "annotator__first_name",
            "annotator__last_name",
            "status",
        )
        .annotate(n=Count("id"))
        .order_by()
    )
    for r in per_status:
        row = people.setdefault(
            r["annotator_id"],
            AnnotatorRow(
                user_id=r["annotator_id"],
                name=_person(
                    r["annotator__first_name"], r["annotator__last_name"], r["annotator__username"]
                ),
            ),
        )
        if r["status"] == LabelAssignment.Status.DONE:
            row.done += r["n"]
        elif r["status"] == LabelAssignment.Status.SKIPPED:
            row.skipped += r["n"]
        else:
            row.open += r["n"]

    per_day: dict[date, int] = defaultdict(int)
    recent = (
        Annotation.objects.filter(assignment__job=job, created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("annotator_id", "day")
        .annotate(n=Count("id"))
        .order_by()
    )
    for d in recent:
        if d["annotator_id"] in people:
            people[d["annotator_id"]].per_day[d["day"]] = d["n"]
        per_day[d["day"]] += d["n"]

    for annotator_id, middle in (
        Annotation.objects.filter(assignment__job=job, seconds_spent__isnull=False)
        .values("annotator_id")
        .annotate(middle=_Median("seconds_spent"))
        .values_list("annotator_id", "middle")
        .order_by()
    ):
        if annotator_id in people:
            people[annotator_id].median_seconds = middle

    ratings, gold, gold_items = job_ratings(job=job, schema=schema)
    plain = [r for r in ratings if r.item not in gold_items]
    agreement = [
        AgreementRow(label=a.label, title=schema.title(a.label), result=a)
        for a in job_agreement(plain, schema.labels, raters_per_item=job.annotators_per_overlap)
    ]
    for rater, pairs in rater_agreement(plain, schema.labels).items():
        if rater in people:
            people[rater].agreement = pairs
    for rater, accuracy in gold_accuracy(ratings, gold, schema.labels).items():
        if rater in people:
            people[rater].gold = accuracy

    return JobStats(
        job=job,
        schema=schema,
        progress=progress,
        days=day_list,
        per_day=dict(per_day),
        annotators=sorted(people.values(), key=lambda p: (-p.done, p.name)),
        agreement=agreement,
        eligibility=export_eligibility(dataset_id=job.dataset_id),
    )


def annotator_gold_accuracy(
    *, job: LabelJob, annotator_id: int, schema: LabelSchema
) -> float | None:
    """Share of labels an annotator got right on the job's gold episodes; None before any."""
    rows = Annotation.objects.filter(
        assignment__job=job, annotator_id=annotator_id, episode__gold_label__isnull=False
    ).values_list(
        "episode_id",
        "value_ids",
        "outcome",
        "failure_mode_id",
        "episode__gold_label__value_ids",
        "episode__gold_label__outcome",
        "episode__gold_label__failure_mode_id",
    )
    ratings, gold = [], {}
    for episode_id, values, outcome, mode, g_values, g_outcome, g_mode in rows:
        ratings.append(Rating(episode_id, annotator_id, schema.vector(values, outcome, mode)))
        gold[episode_id] = schema.vector(g_values, g_outcome, g_mode)
    overall = gold_accuracy(ratings, gold, schema.labels).get(annotator_id, {}).get("*")
    return overall.share if overall else None


# --- the review queue -------------------------------------------------------------------------


@dataclass
class ReviewAnswer:
    annotator: str
    vector: dict[str, Label]
    notes: str
    flagged: bool
    seconds: float | None


@dataclass
class ReviewCase:
    episode: Episode
    answers: list[ReviewAnswer]
    disagreements: list[str]  # label names on which the answers differ
    suggestion: dict[str, Label]  # the most common answer per label (first on ties)
    intended: dict[str, Label]

    def cells(self, schema: LabelSchema) -> list[dict[str, Any]]:
        """Rows of the side-by-side table: label, intended, each answer, whether they differ."""
        return [
            {
                "label": name,
                "title": schema.title(name),
                "intended": schema.describe(name, self.intended.get(name)),
                "answers": [schema.describe(name, a.vector.get(name)) for a in self.answers],
                "differs": name in self.disagreements,
            }
            for name in schema.labels
        ]


def _suggest(vectors: Sequence[dict[str, Label]], labels: Sequence[str]) -> dict[str, Label]:
    out: dict[str, Label] = {}
    for name in labels:
        counts: dict[Label, int] = {}
        for v in vectors:
            counts[v.get(name)] = counts.get(v.get(name), 0) + 1
        out[name] = max(counts, key=lambda k: counts[k]) if counts else None
    return out


def intended_vector(episode: Episode, schema: LabelSchema) -> dict[str, Label]:
    """What the protocol intended (the labels before any were accepted)."""
    intended = (episode.extra or {}).get("intended")
    if isinstance(intended, dict):
        return schema.vector(
            intended.get("value_ids") or [],
            intended.get("outcome") or Episode.Outcome.UNKNOWN,
            intended.get("failure_mode"),
        )
    values = list(episode.condition_set.value_ids) if episode.condition_set else []
    return schema.vector(values, episode.outcome, episode.failure_mode_id)


def review_queue(
    *, job: LabelJob, schema: LabelSchema, limit: int = 20
) -> tuple[int, list[ReviewCase]]:
    """Episodes awaiting a reviewer (all annotations in, no agreement), oldest first."""
    base = Episode.objects.filter(label_item__job=job, label_status=Episode.LabelStatus.LABELLED)
    total = base.count()
    episodes = list(
        base.select_related("site", "task", "condition_set", "failure_mode").order_by(
            "updated_at", "id"
        )[:limit]
    )
    answers: dict[int, list[Annotation]] = defaultdict(list)
    for a in (
        Annotation.objects.filter(episode__in=episodes, assignment__job=job)
        .select_related("annotator")
        .order_by("id")
    ):
        answers[a.episode_id].append(a)
    cases = []
    for episode in episodes:
        given = [
            ReviewAnswer(
                annotator=_person(
                    a.annotator.first_name, a.annotator.last_name, a.annotator.username
                ),
                vector=schema.vector(a.value_ids, a.outcome, a.failure_mode_id),
                notes=a.notes,
                flagged=a.flagged,
                seconds=a.seconds_spent,
            )
            for a in answers[episode.pk]
        ]
        vectors = [g.vector for g in given]
        cases.append(
            ReviewCase(
                episode=episode,
                answers=given,
                disagreements=[n for n in schema.labels if len({v.get(n) for v in vectors}) > 1],
                suggestion=_suggest(vectors, schema.labels),
                intended=intended_vector(episode, schema),
            )
        )
    return total, cases


# --- one episode as the annotator sees it -------------------------------------------------------


@dataclass(frozen=True)
class MediaFile:
    index: int
    name: str
    kind: str  # "video" or "image"
    content_type: str
    path: Path


def episode_media(episode: Episode) -> list[MediaFile]:
    """The episode's stored media (video or images) under MEDIA_ROOT, from ``extra["media"]``
    (a list of paths relative to MEDIA_ROOT) or ``extra["media_path"]``. Paths outside
    MEDIA_ROOT, missing files and other kinds of file are left out."""
    extra = episode.extra or {}
    raw = extra.get("media")
    names: list[str] = [str(n) for n in raw if isinstance(n, str)] if isinstance(raw, list) else []
    if isinstance(extra.get("media_path"), str):
        names.append(extra["media_path"])
    root = Path(settings.MEDIA_ROOT).resolve()
    found: list[MediaFile] = []
    for name in names:
        path = (root / name).resolve()
        if root not in path.parents or not path.is_file():
            continue
        suffix = path.suffix.lower()
        if suffix in VIDEO_SUFFIXES:
            kind, content_type = "video", VIDEO_SUFFIXES[suffix]
        elif suffix in IMAGE_SUFFIXES:
            kind, content_type = "image", IMAGE_SUFFIXES[suffix]
        else:
            continue
        found.append(MediaFile(len(found), path.name, kind, content_type, path))
    return found


@dataclass
class CaptureCheck:
    name: str
    passed: bool
    message: str


@dataclass
class CaptureSummary:
    """Capture validation of an episode: verdict, sync status, checks of its recording."""

    sync_status: str
    sync_label: str
    passed: bool | None
    failed_checks: list[str]
    checks: list[CaptureCheck]
    recording: str | None
    duration_s: float | None


def capture_summary(episode: Episode, recording: Recording | None) -> CaptureSummary:
    verdict = (episode.extra or {}).get("capture") or {}
    report = (recording.report or {}) if recording is not None else {}
    checks = [
        CaptureCheck(str(c.get("name", "")), bool(c.get("passed")), str(c.get("message", "")))
        for c in report.get("checks") or []
        if isinstance(c, dict)
    ]
    passed = verdict.get("passed") if isinstance(verdict, dict) else None
    if passed is None and report.get("passed") is not None:
        passed = bool(report["passed"])
    failed = (
        [str(c) for c in (verdict.get("failed_checks") or [])] if isinstance(verdict, dict) else []
    )
    return CaptureSummary(
        sync_status=episode.sync_status,
        sync_label=episode.get_sync_status_display(),
        passed=passed,
        failed_checks=failed or [c.name for c in checks if not c.passed],
        checks=checks,
        recording=recording.original_name if recording is not None else None,
        duration_s=report.get("duration_s"),
    )


@dataclass
class AssignmentPage:
    assignment: LabelAssignment
    episode: Episode
    schema: LabelSchema
    prefill: dict[str, Label]
    intended: dict[str, Label]
    capture: CaptureSummary
    media: list[MediaFile]
    annotation: Annotation | None
    done_by_me: int
    remaining: int


def assignment_page(*, assignment: LabelAssignment) -> AssignmentPage:
    """Everything the labelling page shows for one assignment (a fixed number of queries)."""
    job = assignment.job
    schema = label_schema(job=job)
    episode = Episode.objects.select_related(
        "dataset", "site", "task", "embodiment", "condition_set", "failure_mode"
    ).get(pk=assignment.episode_id)
    recording = (
        Recording.objects.filter(episode=episode, is_calibration=False)
        .order_by("-created_at")
        .first()
        or Recording.objects.filter(episode=episode).order_by("-created_at").first()
    )
    annotation = Annotation.objects.filter(assignment=assignment).first()
    intended = intended_vector(episode, schema)
    prefill = (
        schema.vector(annotation.value_ids, annotation.outcome, annotation.failure_mode_id)
        if annotation is not None
        else intended
    )
    counts = LabelAssignment.objects.filter(
        job=job, annotator_id=assignment.annotator_id
    ).aggregate(done=Count("id", filter=Q(status=LabelAssignment.Status.DONE)))
    remaining = (
        LabelItem.objects.filter(
            job=job, is_gold=False, claims__lt=F("required"), episode__label_status__in=PENDING
        )
        .exclude(episode__label_assignments__annotator_id=assignment.annotator_id)
        .count()
    )
    return AssignmentPage(
        assignment=assignment,
        episode=episode,
        schema=schema,
        prefill=prefill,
        intended=intended,
        capture=capture_summary(episode, recording),
        media=episode_media(episode),
        annotation=annotation,
        done_by_me=counts["done"],
        remaining=remaining,
    )


# --- the queue page ---------------------------------------------------------------------------


@dataclass
class QueueRow:
    job: LabelJob
    items: int
    available: int
    in_review: int
    accepted: int
    mine_done: int
    mine_open: int


def label_queue(*, jobs: Iterable[LabelJob], user_id: int) -> list[QueueRow]:
    """Open jobs with what is left to label and what this person has done (two queries)."""
    job_list = list(jobs)
    counts: dict[int, Any] = {
        r["pk"]: r
        for r in LabelJob.objects.filter(pk__in=[j.pk for j in job_list])
        .with_counts()
        .values("pk", "n_items", "n_available", "n_review", "n_accepted")
        .order_by()
    }
    mine: dict[int, dict[str, int]] = defaultdict(lambda: {"done": 0, "open": 0})
    for r in (
        LabelAssignment.objects.filter(job__in=job_list, annotator_id=user_id)
        .values("job_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        if r["status"] == LabelAssignment.Status.DONE:
            mine[r["job_id"]]["done"] += r["n"]
        elif r["status"] == LabelAssignment.Status.ASSIGNED:
            mine[r["job_id"]]["open"] += r["n"]
    return [
        QueueRow(
            job=j,
            items=counts.get(j.pk, {}).get("n_items", 0),
            available=counts.get(j.pk, {}).get("n_available", 0),
            in_review=counts.get(j.pk, {}).get("n_review", 0),
            accepted=counts.get(j.pk, {}).get("n_accepted", 0),
            mine_done=mine[j.pk]["done"],
            mine_open=mine[j.pk]["open"],
        )
        for j in job_list
    ]
