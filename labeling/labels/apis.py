"""REST API for labelling: jobs (with the queue), assignments, annotations, reviews and gold
labels (dataset exports: :mod:`labeling.exports.apis`). Every queryset is scoped to the
caller; annotators see only their own assignments and annotations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import ScopedRelatedField, ScopedViewSetMixin
from accounts.models import membership_of
from accounts.pagination import LargeListPagination
from accounts.permissions import LABELLERS, MANAGERS
from labeling.labels.selectors import job_stats, label_schema, review_queue
from labeling.labels.services import (
    AlreadyDecided,
    LabelingError,
    annotation_submit,
    assignment_skip,
    gold_label_set,
    label_job_create,
    label_job_update,
    label_next,
    review_resolve,
)
from labeling.models import (
    Annotation,
    Dataset,
    Episode,
    GoldLabel,
    LabelAssignment,
    LabelJob,
    Review,
)


def _sees_label_status(context: Mapping[str, Any]) -> bool:
    """Managers see an episode's label status; annotators do not, since on a claim it would
    tell a gold episode (already accepted) from an ordinary one."""
    request = context.get("request")
    membership = membership_of(request.user) if request is not None else None
    return membership is not None and membership.role in MANAGERS


def _bad(exc: Exception, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({"detail": str(exc)}, status=code)


class _Answer(serializers.Serializer):
    """An answer: condition values present, outcome, failure mode (only for failures)."""

    condition_values = serializers.ListField(
        child=serializers.IntegerField(), required=False, default=list,
        help_text="Condition value ids, at most one per dimension of the job.",
    )  # fmt: skip
    outcome = serializers.ChoiceField(choices=Episode.Outcome.choices)
    failure_mode = serializers.IntegerField(required=False, allow_null=True, default=None)


# --- jobs ---------------------------------------------------------------------------------------


class LabelJobSerializer(serializers.ModelSerializer):
    dataset_name = serializers.CharField(source="dataset.name", read_only=True)
    # A plain string: a second enum component named "status" would collide in the schema.
    status = serializers.CharField(read_only=True, help_text="open or closed")
    items = serializers.IntegerField(source="n_items", read_only=True, default=0)
    backlog = serializers.IntegerField(source="n_backlog", read_only=True, default=0)
    in_review = serializers.IntegerField(source="n_review", read_only=True, default=0)
    accepted = serializers.IntegerField(source="n_accepted", read_only=True, default=0)
    rejected = serializers.IntegerField(source="n_rejected", read_only=True, default=0)

    class Meta:
        model = LabelJob
        fields = [
            "id",
            "dataset",
            "dataset_name",
            "status",
            "overlap_share",
            "annotators_per_overlap",
            "gold_share",
            "accuracy_threshold",
            "dimensions",
            "claim_minutes",
            "instructions",
            "items",
            "backlog",
            "in_review",
            "accepted",
            "rejected",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class LabelJobCreateSerializer(serializers.Serializer):
    dataset = ScopedRelatedField(queryset=Dataset.objects.all())
    overlap_share = serializers.FloatField(required=False, default=0.2, min_value=0, max_value=1)
    annotators_per_overlap = serializers.IntegerField(
        required=False, default=2, min_value=2, max_value=10
    )
    gold_share = serializers.FloatField(required=False, default=0.1, min_value=0, max_value=1)
    accuracy_threshold = serializers.FloatField(
        required=False, default=0.8, min_value=0, max_value=1
    )
    dimensions = serializers.ListField(
        child=serializers.CharField(), required=False, default=list,
        help_text="Dimension ids or slugs to label; empty: all of them.",
    )  # fmt: skip
    claim_minutes = serializers.IntegerField(required=False, default=30, min_value=1)
    instructions = serializers.CharField(required=False, default="", allow_blank=True)


class LabelJobUpdateSerializer(serializers.Serializer):
    status = serializers.CharField(required=False, help_text="open or closed")
    overlap_share = serializers.FloatField(required=False, min_value=0, max_value=1)
    annotators_per_overlap = serializers.IntegerField(required=False, min_value=2, max_value=10)
    gold_share = serializers.FloatField(required=False, min_value=0, max_value=1)
    accuracy_threshold = serializers.FloatField(required=False, min_value=0, max_value=1)
    dimensions = serializers.ListField(child=serializers.CharField(), required=False)
    claim_minutes = serializers.IntegerField(required=False, min_value=1)
    instructions = serializers.CharField(required=False, allow_blank=True)

    def validate_status(self, value: str) -> str:
        if value not in LabelJob.Status.values:
            raise serializers.ValidationError("expected open or closed")
        return value


class AgreementSerializer(serializers.Serializer):
    label = serializers.CharField()  # type: ignore[assignment]
    title = serializers.CharField()
    method = serializers.CharField(help_text="cohen (pairs), fleiss (more), or empty")
    kappa = serializers.FloatField(allow_null=True)
    items = serializers.IntegerField()
    agreement = serializers.FloatField(allow_null=True, help_text="share of items all agree on")


class AnnotatorStatsSerializer(serializers.Serializer):
    annotator = serializers.IntegerField()
    name = serializers.CharField()
    done = serializers.IntegerField()
    skipped = serializers.IntegerField()
    open = serializers.IntegerField()
    median_seconds = serializers.FloatField(allow_null=True)
    gold_accuracy = serializers.FloatField(allow_null=True)
    per_day = serializers.DictField(child=serializers.IntegerField())
    kappa = serializers.DictField(child=serializers.FloatField(allow_null=True))


class ExclusionSerializer(serializers.Serializer):
    reason = serializers.CharField()
    text = serializers.CharField()
    rows = serializers.IntegerField()
    episodes = serializers.IntegerField()


class EligibilitySerializer(serializers.Serializer):
    rows = serializers.IntegerField()
    episodes = serializers.IntegerField()
    frames = serializers.IntegerField()
    excluded_rows = serializers.IntegerField()
    excluded_episodes = serializers.IntegerField()
    reasons = ExclusionSerializer(many=True)


class JobStatsSerializer(serializers.Serializer):
    items = serializers.IntegerField()
    gold = serializers.IntegerField()
    overlapped = serializers.IntegerField()
    unlabelled = serializers.IntegerField()
    in_progress = serializers.IntegerField()
    in_review = serializers.IntegerField()
    accepted = serializers.IntegerField()
    rejected = serializers.IntegerField()
    annotations = serializers.IntegerField()
    backlog = serializers.IntegerField()
    per_day = serializers.DictField(child=serializers.IntegerField())
    agreement = AgreementSerializer(many=True)
    annotators = AnnotatorStatsSerializer(many=True)
    export = EligibilitySerializer()


class LabelJobDetailSerializer(LabelJobSerializer):
    stats = serializers.SerializerMethodField(
        help_text="Throughput, agreement and each annotator's accuracy: managers only (null "
        "for annotators, as the job page is the manager's)."
    )

    class Meta(LabelJobSerializer.Meta):
        fields = [*LabelJobSerializer.Meta.fields, "stats"]
        read_only_fields = fields

    @extend_schema_field(JobStatsSerializer(allow_null=True))
    def get_stats(self, obj: LabelJob) -> dict[str, Any] | None:
        if not _sees_label_status(self.context):
            return None
        stats = job_stats(job=obj)
        p = stats.progress
        return {
            "items": p.items,
            "gold": p.gold,
            "overlapped": p.overlapped,
            "unlabelled": p.unlabelled,
            "in_progress": p.in_progress,
            "in_review": p.in_review,
            "accepted": p.accepted,
            "rejected": p.rejected,
            "annotations": p.annotations,
            "backlog": p.backlog,
            "per_day": {d.isoformat(): n for d, n in sorted(stats.per_day.items())},
            "agreement": [
                {
                    "label": a.label,
                    "title": a.title,
                    "method": a.result.method,
                    "kappa": a.result.kappa,
                    "items": a.result.items,
                    "agreement": a.result.agreement,
                }
                for a in stats.agreement
            ],
            "annotators": [
                {
                    "annotator": a.user_id,
                    "name": a.name,
                    "done": a.done,
                    "skipped": a.skipped,
                    "open": a.open,
                    "median_seconds": a.median_seconds,
                    "gold_accuracy": a.gold_accuracy,
                    "per_day": {d.isoformat(): n for d, n in sorted(a.per_day.items())},
                    "kappa": {label: pair.kappa for label, pair in a.agreement.items()},
                }
                for a in stats.annotators
            ],
            "export": stats.eligibility.as_dict(),
        }


class _LabelStatusField(serializers.SerializerMethodField):
    """The episode's label status for managers, null for annotators (see _sees_label_status)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "The episode's label status; null unless a manager asks.")
        super().__init__(method_name="get_label_status", **kwargs)


class _LabelStatusMixin:
    context: dict[str, Any]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_label_status(self, obj: Any) -> str | None:
        return obj.episode.label_status if _sees_label_status(self.context) else None


class LabelAssignmentSerializer(_LabelStatusMixin, serializers.ModelSerializer):
    episode_key = serializers.CharField(source="episode.key", read_only=True)
    label_status = _LabelStatusField()
    annotation = serializers.SerializerMethodField()

    class Meta:
        model = LabelAssignment
        fields = [
            "id",
            "job",
            "episode",
            "episode_key",
            "label_status",
            "annotator",
            "status",
            "assigned_at",
            "expires_at",
            "finished_at",
            "annotation",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_annotation(self, obj: LabelAssignment) -> int | None:
        annotation = getattr(obj, "annotation", None)
        return annotation.pk if annotation is not None else None


class ReviewCaseSerializer(serializers.Serializer):
    episode = serializers.IntegerField()
    key = serializers.CharField()
    disagreements = serializers.ListField(child=serializers.CharField())
    answers = serializers.ListField(child=serializers.DictField())
    suggestion = serializers.DictField()


def _job_queryset() -> Any:
    return LabelJob.objects.select_related("dataset").with_counts().order_by("-created_at", "-id")


class LabelJobViewSet(
    ScopedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Label jobs (one per dataset) with their progress; the detail adds throughput,
    agreement per label and annotator, and what does not export. ``POST next`` claims the
    caller's next episode."""

    base_queryset = LabelJob.objects.all()
    filterset_fields = ["dataset", "status"]
    http_method_names = ["get", "post", "patch", "head", "options"]

    # Annotators find their jobs and claim from them; the review queue (every annotator's
    # answers and notes) and the settings are the manager's, as on the pages.
    read_roles = LABELLERS
    action_roles = {"next": LABELLERS, "review_queue": MANAGERS}

    def get_queryset(self) -> Any:
        return _job_queryset().visible_to(self.request.user)

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return LabelJobDetailSerializer if self.action == "retrieve" else LabelJobSerializer

    @extend_schema(request=LabelJobCreateSerializer, responses={201: LabelJobSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        incoming = LabelJobCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = dict(incoming.validated_data)
        try:
            job = label_job_create(actor=request.user, **data)
        except LabelingError as exc:
            return _bad(exc)
        return Response(
            LabelJobSerializer(self.get_queryset().get(pk=job.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=LabelJobUpdateSerializer, responses=LabelJobSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        job = self.get_object()
        incoming = LabelJobUpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            label_job_update(job=job, actor=request.user, **incoming.validated_data)
        except LabelingError as exc:
            return _bad(exc)
        return Response(LabelJobSerializer(self.get_queryset().get(pk=job.pk)).data)

    @extend_schema(
        request=None,
        responses={
            200: LabelAssignmentSerializer,
            204: OpenApiResponse(description="Nothing left for you in this job."),
            409: OpenApiResponse(description="The job is closed."),
        },
    )
    @action(detail=True, methods=["post"])
    def next(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        try:
            assignment = label_next(annotator=request.user, job=job)
        except LabelingError as exc:
            return _bad(exc, status.HTTP_409_CONFLICT)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        assignment = LabelAssignment.objects.select_related("episode").get(pk=assignment.pk)
        return Response(LabelAssignmentSerializer(assignment, context={"request": request}).data)

    @extend_schema(request=None, responses=ReviewCaseSerializer(many=True))
    @action(detail=True, methods=["get"], url_path="review-queue")
    def review_queue(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        schema = label_schema(job=job)
        total, cases = review_queue(job=job, schema=schema, limit=100)
        data = [
            {
                "episode": c.episode.pk,
                "key": c.episode.key,
                "disagreements": c.disagreements,
                "answers": [
                    {
                        "annotator": a.annotator,
                        "labels": a.vector,
                        "notes": a.notes,
                        "flagged": a.flagged,
                    }
                    for a in c.answers
                ],
                "suggestion": c.suggestion,
            }
            for c in cases
        ]
        return Response(data, headers={"X-Total-Count": str(total)})


# --- assignments and annotations ----------------------------------------------------------------


class LabelAssignmentViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Episodes handed to annotators (annotators see their own). ``POST skip`` gives one back."""

    base_queryset = LabelAssignment.objects.select_related("episode", "annotation")
    serializer_class = LabelAssignmentSerializer
    pagination_class = LargeListPagination
    filterset_fields = ["job", "status", "annotator", "episode"]
    ordering_fields: list[str] = []
    read_roles = LABELLERS
    write_roles = LABELLERS

    @extend_schema(request=None, responses=LabelAssignmentSerializer)
    @action(detail=True, methods=["post"])
    def skip(self, request: Request, pk: str | None = None) -> Response:
        assignment = self.get_object()
        try:
            assignment_skip(assignment=assignment, actor=request.user)
        except LabelingError as exc:
            return _bad(exc, status.HTTP_409_CONFLICT)
        assignment = self.get_queryset().get(pk=assignment.pk)
        return Response(LabelAssignmentSerializer(assignment, context={"request": request}).data)


class AnnotationSerializer(_LabelStatusMixin, serializers.ModelSerializer):
    job = serializers.IntegerField(source="assignment.job_id", read_only=True)
    condition_values = serializers.ListField(
        source="value_ids", child=serializers.IntegerField(), read_only=True
    )
    label_status = _LabelStatusField()

    class Meta:
        model = Annotation
        fields = [
            "id",
            "assignment",
            "job",
            "episode",
            "annotator",
            "condition_values",
            "outcome",
            "failure_mode",
            "notes",
            "flagged",
            "seconds_spent",
            "label_status",
            "created_at",
        ]
        read_only_fields = fields


class AnnotationCreateSerializer(_Answer):
    assignment = ScopedRelatedField(queryset=LabelAssignment.objects.select_related("job"))
    notes = serializers.CharField(required=False, default="", allow_blank=True)
    seconds_spent = serializers.FloatField(required=False, allow_null=True, default=None)
    flagged = serializers.BooleanField(
        required=False, default=False, help_text="Send the episode to a reviewer."
    )


class AnnotationViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Answers (annotators see theirs). ``POST`` submits the answer to an open assignment;
    the episode is accepted or sent to review by the accept rule."""

    base_queryset = Annotation.objects.select_related("assignment", "episode")
    serializer_class = AnnotationSerializer
    pagination_class = LargeListPagination
    filterset_fields = ["episode", "annotator", "assignment__job"]
    ordering_fields: list[str] = []
    read_roles = LABELLERS
    write_roles = LABELLERS

    @extend_schema(request=AnnotationCreateSerializer, responses={201: AnnotationSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        incoming = AnnotationCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            annotation = annotation_submit(
                assignment=data["assignment"],
                actor=request.user,
                value_ids=data["condition_values"],
                outcome=data["outcome"],
                failure_mode_id=data["failure_mode"],
                notes=data["notes"],
                seconds_spent=data["seconds_spent"],
                flagged=data["flagged"],
            )
        except LabelingError as exc:
            return _bad(exc)
        return Response(
            AnnotationSerializer(
                self.base_queryset.get(pk=annotation.pk), context={"request": request}
            ).data,
            status=status.HTTP_201_CREATED,
        )


# --- reviews and gold ------------------------------------------------------------------------------


class ReviewSerializer(serializers.ModelSerializer):
    condition_values = serializers.ListField(
        source="value_ids", child=serializers.IntegerField(), read_only=True
    )

    class Meta:
        model = Review
        fields = [
            "id",
            "job",
            "episode",
            "reviewer",
            "decision",
            "condition_values",
            "outcome",
            "failure_mode",
            "reason",
            "created_at",
        ]
        read_only_fields = fields


class ReviewCreateSerializer(_Answer):
    episode = ScopedRelatedField(queryset=Episode.objects.select_related("condition_set"))
    decision = serializers.ChoiceField(choices=Review.Decision.choices)
    outcome = serializers.ChoiceField(
        choices=Episode.Outcome.choices, required=False, default=Episode.Outcome.UNKNOWN
    )
    reason = serializers.CharField(required=False, default="", allow_blank=True)
    make_gold = serializers.BooleanField(required=False, default=False)


class ReviewViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Reviewers' decisions. ``POST`` accepts an episode with the resolved labels (written
    back to the episode) or rejects it with a reason."""

    base_queryset = Review.objects.all()
    serializer_class = ReviewSerializer
    filterset_fields = ["job", "episode", "decision"]
    # Annotators see reviews of their own answers, except on gold episodes (ReviewQuerySet).
    read_roles = LABELLERS

    @extend_schema(
        request=ReviewCreateSerializer,
        responses={
            201: ReviewSerializer,
            409: OpenApiResponse(description="The episode was decided already."),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        incoming = ReviewCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            review = review_resolve(
                episode=data["episode"],
                reviewer=request.user,
                decision=data["decision"],
                value_ids=data["condition_values"],
                outcome=data["outcome"],
                failure_mode_id=data["failure_mode"],
                reason=data["reason"],
                make_gold=data["make_gold"],
            )
        except AlreadyDecided as exc:
            return _bad(exc, status.HTTP_409_CONFLICT)
        except LabelingError as exc:
            return _bad(exc)
        return Response(ReviewSerializer(review).data, status=status.HTTP_201_CREATED)


class GoldLabelSerializer(serializers.ModelSerializer):
    condition_values = serializers.ListField(
        source="value_ids", child=serializers.IntegerField(), read_only=True
    )

    class Meta:
        model = GoldLabel
        fields = ["id", "episode", "condition_values", "outcome", "failure_mode", "created_at"]
        read_only_fields = fields


class GoldLabelCreateSerializer(_Answer):
    episode = ScopedRelatedField(queryset=Episode.objects.select_related("condition_set"))


class GoldLabelViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Gold episodes: known labels that score annotators. ``POST`` makes (or updates) one."""

    base_queryset = GoldLabel.objects.all()
    serializer_class = GoldLabelSerializer
    filterset_fields = ["episode"]
    # Gold answers score annotators: only managers may know which episodes are gold.
    read_roles = MANAGERS

    @extend_schema(request=GoldLabelCreateSerializer, responses={201: GoldLabelSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        incoming = GoldLabelCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            gold = gold_label_set(
                episode=data["episode"],
                actor=request.user,
                value_ids=data["condition_values"],
                outcome=data["outcome"],
                failure_mode_id=data["failure_mode"],
            )
        except LabelingError as exc:
            return _bad(exc)
        return Response(GoldLabelSerializer(gold).data, status=status.HTTP_201_CREATED)
