"""REST API for campaigns, rounds and field teams."""

from __future__ import annotations

from django.db.models import Count
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import CustomerField, ScopedModelViewSet, ScopedRelatedField, ScopedViewSetMixin
from campaigns.models import Campaign, CollectionRound, FieldTeam
from campaigns.services import RoundTransitionRefused, round_create, round_transition
from sites.models import Deployment, Embodiment, Task


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


class FieldTeamViewSet(ScopedModelViewSet):
    base_queryset = FieldTeam.objects.prefetch_related("embodiments")
    serializer_class = FieldTeamSerializer
    filterset_fields = ["slug"]
    search_fields = ["name", "home_base"]
