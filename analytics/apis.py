"""REST API for gap reports (and, later, evaluations and steering)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.paginator import Paginator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import JobSerializer, ScopedRelatedField, ScopedViewSetMixin
from accounts.permissions import MANAGERS, PLANNERS_AND_CUSTOMERS
from analytics.models import (
    EvaluationResult,
    EvaluationRun,
    GapCell,
    GapReport,
    PolicyVersion,
    RoundImpactReport,
)
from analytics.selectors import GapFilterInvalid, gap_cells
from analytics.services.policies import policy_version_create, policy_version_update
from campaigns.apis import PlanRequestSerializer, RoundViewSet
from campaigns.models import Campaign, CollectionRound
from labeling.models import Dataset
from sites.models import Embodiment, Task
from sites.services import LinkRefused


class GapReportSerializer(serializers.ModelSerializer):
    job_status = serializers.CharField(
        source="job.status", read_only=True, allow_null=True, default=None
    )
    progress = serializers.SerializerMethodField()

    class Meta:
        model = GapReport
        fields = [
            "id",
            "campaign",
            "status",
            "job_status",
            "progress",
            "dimension_slugs",
            "params",
            "summary",
            "sources",
            "n_cells",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_progress(self, obj: GapReport) -> dict[str, Any] | None:
        if obj.job is None:
            return None
        return {
            "done": obj.job.progress_done,
            "total": obj.job.progress_total,
            "message": obj.job.message,
        }


class GapReportRequestSerializer(serializers.Serializer):
    campaign = ScopedRelatedField(queryset=Campaign.objects.all())
    dimensions = serializers.ListField(
        child=serializers.SlugField(), required=False, allow_empty=True
    )


class GapCellSerializer(serializers.ModelSerializer):
    class Meta:
        model = GapCell
        fields = [
            "rank",
            "label",
            "values",
            "value_ids",
            "target_share",
            "train_count",
            "train_share",
            "coverage",
            "trials",
            "successes",
            "failure_rate",
            "failure_low",
            "failure_high",
            "interventions_per_day",
            "priority",
            "priority_elsewhere",
            "effective_count",
            "explanation",
        ]


class GapCellPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    results = GapCellSerializer(many=True)


class GapReportViewSet(
    ScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Gap reports of campaigns. POST queues a new report (computed in Celery; poll its status)."""

    base_queryset = GapReport.objects.select_related("job").order_by("-created_at")
    serializer_class = GapReportSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["campaign", "status"]

    @extend_schema(request=GapReportRequestSerializer, responses={202: GapReportSerializer})
    def create(self, request: Request) -> Response:
        from analytics.services.gap import gap_report_request

        payload = GapReportRequestSerializer(data=request.data, context={"request": request})
        payload.is_valid(raise_exception=True)
        report = gap_report_request(
            campaign=payload.validated_data["campaign"],
            dimensions=payload.validated_data.get("dimensions") or None,
            actor=request.user,
        )
        return Response(
            GapReportSerializer(self.get_queryset().get(pk=report.pk)).data,
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("coverage", int, description="0 uncovered, 1 thin, 2 covered"),
            OpenApiParameter("q", str, description="text in the cell label"),
            OpenApiParameter(
                "value", str, description="dimension=value slug, e.g. lighting=dim-sodium"
            ),
            OpenApiParameter(
                "sort",
                str,
                enum=["rank", "priority", "interventions", "target", "training", "failure"],
            ),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses=GapCellPageSerializer,
    )
    @action(detail=True, methods=["get"])
    def cells(self, request: Request, pk: str | None = None) -> Response:
        report = self.get_object()
        try:
            qs = gap_cells(
                report=report,
                coverage=request.query_params.get("coverage"),
                search=request.query_params.get("q"),
                value=request.query_params.get("value"),
                sort=request.query_params.get("sort", "rank"),
            )
        except GapFilterInvalid as exc:
            return Response({exc.parameter: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            size = max(1, min(1000, int(request.query_params.get("page_size", 100))))
        except ValueError:
            size = 100
        page = Paginator(qs, size).get_page(request.query_params.get("page"))
        return Response(
            {
                "count": page.paginator.count,
                "page": page.number,
                "pages": page.paginator.num_pages,
                "results": GapCellSerializer(page.object_list, many=True).data,
            }
        )


class RoundPlanningViewSet(RoundViewSet):
    """Rounds, with planning: POST plan (or resolve, which keeps locked targets and tasks)."""

    def _plan(self, request: Request) -> Response:
        from accounts.apis import JobSerializer
        from analytics.services.planning import round_plan_request

        round = self.get_object()
        payload = PlanRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        if not round.is_editable:
            return Response(
                {
                    "detail": f"Round {round.number} is {round.status}; only draft or planned rounds can be planned."
                },
                status=status.HTTP_409_CONFLICT,
            )
        job = round_plan_request(round=round, actor=request.user, **payload.validated_data)
        job.refresh_from_db()
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=PlanRequestSerializer, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def plan(self, request: Request, pk: str | None = None) -> Response:
        return self._plan(request)

    @extend_schema(request=PlanRequestSerializer, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        return self._plan(request)


class PolicyVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = PolicyVersion
        fields = [
            "id",
            "slug",
            "name",
            "embodiment",
            "task",
            "trained_on_datasets",
            "trained_on_rounds",
            "released_on",
            "notes",
        ]

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        for name, model in (
            ("embodiment", Embodiment),
            ("task", Task),
            ("trained_on_datasets", Dataset),
            ("trained_on_rounds", CollectionRound),
        ):
            many = name.startswith("trained")
            fields[name] = ScopedRelatedField(
                queryset=model.objects.all(),
                many=many,
                required=name != "task" and not many,
                allow_null=name == "task",
            )
        return fields

    def create(self, validated_data: dict[str, Any]) -> PolicyVersion:
        with links_as_400():
            return policy_version_create(
                organization=validated_data.pop("organization"),
                actor=self.context["request"].user,
                datasets=validated_data.pop("trained_on_datasets", []),
                rounds=validated_data.pop("trained_on_rounds", []),
                fields=validated_data,
            )

    def update(self, instance: PolicyVersion, validated_data: dict[str, Any]) -> PolicyVersion:
        with links_as_400():
            return policy_version_update(
                policy=instance,
                actor=self.context["request"].user,
                datasets=validated_data.pop("trained_on_datasets", None),
                rounds=validated_data.pop("trained_on_rounds", None),
                fields=validated_data,
            )


@contextmanager
def links_as_400() -> Iterator[None]:
    try:
        yield
    except LinkRefused as exc:
        raise serializers.ValidationError({exc.field: str(exc)}) from exc


class PolicyVersionViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    """Policy versions and the datasets and rounds each was trained on."""

    audited_by_service = True

    base_queryset = PolicyVersion.objects.prefetch_related(
        "trained_on_datasets", "trained_on_rounds"
    ).order_by("-created_at")
    serializer_class = PolicyVersionSerializer
    read_roles = MANAGERS
    filterset_fields = ["embodiment", "slug"]


class EvaluationResultSerializer(serializers.ModelSerializer):
    value_ids = serializers.ListField(
        source="condition_set.value_ids", child=serializers.IntegerField(), read_only=True
    )

    class Meta:
        model = EvaluationResult
        fields = ["value_ids", "trials", "successes"]


class EvaluationRunSerializer(serializers.ModelSerializer):
    results = EvaluationResultSerializer(many=True, read_only=True)

    class Meta:
        model = EvaluationRun
        fields = [
            "id",
            "policy_version",
            "deployment",
            "site",
            "label",
            "evaluated_on",
            "source",
            "results",
        ]
        read_only_fields = fields


class EvaluationImportSerializer(serializers.Serializer):
    policy = serializers.SlugField()
    deployment = serializers.SlugField(required=False, allow_blank=True, allow_null=True)
    label = serializers.CharField(max_length=200)  # type: ignore[assignment]
    evaluated_on = serializers.DateField(required=False)
    results = serializers.ListField(child=serializers.DictField(), allow_empty=False)


class EvaluationRunViewSet(
    ScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Evaluation runs. POST imports per-cell or per-episode results (JSON) and refits the curves."""

    base_queryset = (
        EvaluationRun.objects.select_related("policy_version", "deployment")
        .prefetch_related("results__condition_set")
        .order_by("-evaluated_on", "-id")
    )
    serializer_class = EvaluationRunSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["policy_version", "deployment"]

    @extend_schema(request=EvaluationImportSerializer, responses={201: EvaluationRunSerializer})
    def create(self, request: Request) -> Response:
        from accounts.models import membership_of
        from analytics.services.evaluations import EvaluationImportError, evaluation_import_file

        payload = EvaluationImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        membership = membership_of(request.user)
        assert membership is not None
        body = {"results": payload.validated_data["results"]}
        try:
            run = evaluation_import_file(
                organization=membership.organization,
                name="api.json",
                content=json.dumps(body).encode(),
                policy=payload.validated_data["policy"],
                deployment=payload.validated_data.get("deployment") or "",
                label=payload.validated_data["label"],
                evaluated_on=payload.validated_data.get("evaluated_on"),
                actor=request.user,
            )
        except EvaluationImportError as exc:
            return Response(
                {"detail": str(exc), "problems": exc.problems}, status=status.HTTP_400_BAD_REQUEST
            )
        return Response(
            EvaluationRunSerializer(self.get_queryset().get(pk=run.pk)).data,
            status=status.HTTP_201_CREATED,
        )


class RoundImpactSerializer(serializers.ModelSerializer):
    class Meta:
        model = RoundImpactReport
        fields = [
            "id",
            "round",
            "before_policy",
            "after_policy",
            "dimension_slugs",
            "summary",
            "cells",
            "sites",
            "created_at",
        ]
        read_only_fields = fields


class RoundImpactViewSet(
    ScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Measured impact of rounds (before vs after per cell and site, difference in differences)."""

    base_queryset = RoundImpactReport.objects.order_by("-created_at")
    serializer_class = RoundImpactSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["round"]
