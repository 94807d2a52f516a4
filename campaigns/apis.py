"""REST API for campaigns, rounds and field teams."""

from __future__ import annotations

from typing import cast

from django.db.models import Count, Sum
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import (
    CustomerField,
    LocalTimeField,
    ScopedModelViewSet,
    ScopedRelatedField,
    ScopedViewSetMixin,
)
from accounts.permissions import FIELD_ROLES, PLANNERS_AND_CUSTOMERS
from campaigns.models import (
    Campaign,
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    FieldTeam,
    ProtocolStep,
    TaskTarget,
)
from campaigns.services import RoundTransitionRefused, round_create, round_transition
from sites.models import Deployment, Embodiment, Task
from sites.validators import validate_time_zone


class CampaignSerializer(serializers.ModelSerializer):
    customer = CustomerField()
    task = ScopedRelatedField(queryset=Task.objects.all())
    embodiments = ScopedRelatedField(many=True, queryset=Embodiment.objects.all())
    deployments = ScopedRelatedField(many=True, queryset=Deployment.objects.all())

    class Meta:
        model = Campaign
        fields = [
            "id",
            "slug",
            "name",
            "customer",
            "task",
            "embodiments",
            "deployments",
            "reliability_goal",
            "budget_episodes",
            "budget_hours",
            "budget_money",
            "start_date",
            "end_date",
            "transfer_weight",
            "status",
        ]
        extra_kwargs = {"budget_hours": {"min_value": 0}, "budget_money": {"min_value": 0}}

    def validate(self, attrs: dict) -> dict:
        start = attrs.get("start_date", getattr(self.instance, "start_date", None))
        end = attrs.get("end_date", getattr(self.instance, "end_date", None))
        if start and end and end < start:
            raise serializers.ValidationError({"end_date": "Must be on or after start_date."})
        goal = attrs.get("reliability_goal")
        if goal is not None and not 0 < goal < 1:
            raise serializers.ValidationError(
                {"reliability_goal": "Must be strictly between 0 and 1."}
            )
        return attrs


class CampaignViewSet(ScopedModelViewSet):
    base_queryset = Campaign.objects.select_related("customer").prefetch_related(
        "embodiments", "deployments"
    )
    serializer_class = CampaignSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["status", "customer__slug", "slug"]
    search_fields = ["name", "slug"]
    ordering_fields = ["start_date", "name"]


class RoundSerializer(serializers.ModelSerializer):
    campaign = ScopedRelatedField(queryset=Campaign.objects.all())
    n_targets = serializers.IntegerField(read_only=True)
    n_tasks = serializers.IntegerField(read_only=True)

    class Meta:
        model = CollectionRound
        fields = [
            "id",
            "campaign",
            "number",
            "status",
            "dataset",
            "budget_episodes",
            "budget_hours",
            "budget_money",
            "start_date",
            "days",
            "plan_summary",
            "notes",
            "created_at",
            "status_changed_at",
            "n_targets",
            "n_tasks",
        ]
        read_only_fields = [
            "number",
            "status",
            "dataset",
            "plan_summary",
            "created_at",
            "status_changed_at",
        ]
        extra_kwargs = {
            "budget_hours": {"min_value": 0},
            "budget_money": {"min_value": 0},
            "days": {"min_value": 1},
        }


class TransitionSerializer(serializers.Serializer):
    to_status = serializers.ChoiceField(choices=CollectionRound.Status.choices)


class RoundViewSet(
    ScopedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Collection rounds. Status changes only through the ``transition`` action."""

    base_queryset = (
        CollectionRound.objects.select_related("campaign")
        .annotate(n_targets=Count("targets", distinct=True), n_tasks=Count("tasks", distinct=True))
        .order_by("campaign_id", "number")
    )
    serializer_class = RoundSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["campaign", "status"]
    ordering_fields = ["number", "created_at"]

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        data = dict(serializer.validated_data)
        campaign = data.pop("campaign")
        serializer.instance = round_create(campaign=campaign, actor=self.request.user, **data)

    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.perform_create(serializer)
        assert serializer.instance is not None
        instance = self.get_queryset().get(pk=serializer.instance.pk)
        return Response(self.get_serializer(instance).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TransitionSerializer, responses=RoundSerializer)
    @action(detail=True, methods=["post"])
    def transition(self, request: Request, pk: str | None = None) -> Response:
        round = self.get_object()
        payload = TransitionSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            round_transition(
                round=round, to_status=payload.validated_data["to_status"], actor=request.user
            )
        except RoundTransitionRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(self.get_queryset().get(pk=round.pk)).data)

    @extend_schema(request=None, responses=RoundSerializer)
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, pk: str | None = None) -> Response:
        from campaigns.services.plan_edit import PlanEditRefused, round_publish

        round = self.get_object()
        try:
            round_publish(round=round, actor=request.user)
        except PlanEditRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(self.get_queryset().get(pk=round.pk)).data)


class FieldTeamSerializer(serializers.ModelSerializer):
    embodiments = ScopedRelatedField(many=True, queryset=Embodiment.objects.all(), required=False)

    class Meta:
        model = FieldTeam
        fields = [
            "id",
            "slug",
            "name",
            "embodiments",
            "home_base",
            "home_latitude",
            "home_longitude",
            "home_timezone",
            "hours_per_day",
            "travel_speed_kmh",
            "cost_per_hour",
        ]
        extra_kwargs = {"cost_per_hour": {"min_value": 0}}

    def validate_home_timezone(self, value: str) -> str:
        return validate_time_zone(value)


class FieldTeamViewSet(ScopedModelViewSet):
    base_queryset = FieldTeam.objects.prefetch_related("embodiments")
    serializer_class = FieldTeamSerializer
    read_roles = FIELD_ROLES
    filterset_fields = ["slug"]
    search_fields = ["name", "home_base"]


class PlanRequestSerializer(serializers.Serializer):
    budget_episodes = serializers.IntegerField(required=False, min_value=0)
    budget_hours = serializers.FloatField(required=False, min_value=0)
    budget_money = serializers.FloatField(required=False, min_value=0)
    start = serializers.DateField(required=False)
    days = serializers.IntegerField(required=False, min_value=1, max_value=120)
    min_batch = serializers.IntegerField(required=False, min_value=1)


class TargetSerializer(serializers.ModelSerializer):
    value_ids = serializers.ListField(
        source="condition_set.value_ids", child=serializers.IntegerField(), read_only=True
    )
    episodes_planned = serializers.IntegerField(read_only=True)

    class Meta:
        model = CaptureTarget
        fields = [
            "id",
            "round",
            "label",
            "value_ids",
            "failure_mode",
            "episodes_wanted",
            "episodes_planned",
            "priority",
            "expected_avoided_per_day",
            "rationale",
            "locked",
        ]
        read_only_fields = [
            "round",
            "label",
            "value_ids",
            "failure_mode",
            "priority",
            "expected_avoided_per_day",
            "rationale",
        ]


class TargetViewSet(
    ScopedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Capture targets of rounds. PATCH episodes_wanted (locks it) or locked; DELETE removes it from re-solves."""

    base_queryset = (
        CaptureTarget.objects.select_related("condition_set", "round")
        .annotate(episodes_planned=Sum("task_targets__episodes_planned"))
        .order_by("round_id", "-priority", "id")
    )
    serializer_class = TargetSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["round", "locked"]

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        from campaigns.services.plan_edit import PlanEditRefused, target_update

        data = serializer.validated_data
        try:
            serializer.instance = target_update(
                target=cast(CaptureTarget, serializer.instance),
                episodes=data.get("episodes_wanted"),
                locked=data.get("locked"),
                actor=self.request.user,
            )
        except PlanEditRefused as exc:
            raise ConflictError(str(exc)) from exc

    def perform_destroy(self, instance: CaptureTarget) -> None:
        from campaigns.services.plan_edit import PlanEditRefused, target_remove

        try:
            target_remove(target=instance, actor=self.request.user)
        except PlanEditRefused as exc:
            raise ConflictError(str(exc)) from exc


class ConflictError(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The change conflicts with the current state."


class TaskTargetSerializer(serializers.ModelSerializer):
    label = serializers.CharField(source="target.label", read_only=True)  # type: ignore[assignment]

    class Meta:
        model = TaskTarget
        fields = ["target", "label", "episodes_planned"]


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProtocolStep
        fields = ["order", "kind", "title", "instructions", "episodes", "target"]


class CollectionTaskSerializer(serializers.ModelSerializer):
    team = ScopedRelatedField(queryset=FieldTeam.objects.all(), required=False, allow_null=True)
    day = serializers.DateField(write_only=True, required=False)
    start = LocalTimeField(write_only=True, required=False)
    site_name = serializers.CharField(source="site.name", read_only=True)
    targets = TaskTargetSerializer(source="task_targets", many=True, read_only=True)
    steps = StepSerializer(many=True, read_only=True)

    class Meta:
        model = CollectionTask
        fields = [
            "id",
            "round",
            "site",
            "site_name",
            "embodiment",
            "team",
            "scheduled_date",
            "start_at",
            "end_at",
            "travel_hours",
            "travel_km",
            "status",
            "locked",
            "blocked_reason",
            "version",
            "targets",
            "steps",
            "day",
            "start",
        ]
        read_only_fields = [
            "round",
            "site",
            "embodiment",
            "scheduled_date",
            "start_at",
            "end_at",
            "travel_hours",
            "travel_km",
            "status",
            "blocked_reason",
            "version",
        ]


class CollectionTaskViewSet(
    ScopedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Collection tasks. PATCH team / day / start (moves and locks it) or locked; DELETE before publishing."""

    base_queryset = (
        CollectionTask.objects.select_related("site", "team", "round")
        .prefetch_related("task_targets__target", "steps")
        .order_by("scheduled_date", "start_at", "id")
    )
    serializer_class = CollectionTaskSerializer
    read_roles = PLANNERS_AND_CUSTOMERS
    filterset_fields = ["round", "team", "status", "scheduled_date", "locked"]

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        from campaigns.services.plan_edit import PlanEditRefused, task_update

        data = serializer.validated_data
        try:
            serializer.instance = task_update(
                task=cast(CollectionTask, serializer.instance),
                team=data.get("team"),
                day=data.get("day"),
                start=data.get("start"),
                locked=data.get("locked"),
                actor=self.request.user,
            )
        except PlanEditRefused as exc:
            raise ConflictError(str(exc)) from exc

    def perform_destroy(self, instance: CollectionTask) -> None:
        from campaigns.services.plan_edit import PlanEditRefused, task_remove

        try:
            task_remove(task=instance, actor=self.request.user)
        except PlanEditRefused as exc:
            raise ConflictError(str(exc)) from exc

    @extend_schema(request=None, responses=CollectionTaskSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        from campaigns.services.plan_edit import task_cancel

        task = task_cancel(
            task=self.get_object(),
            reason=str(request.data.get("reason", "") if isinstance(request.data, dict) else ""),
            actor=request.user,
        )
        return Response(self.get_serializer(self.get_queryset().get(pk=task.pk)).data)
