"""REST API for the world model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rest_framework import serializers

from accounts.apis import (
    Conflict,
    CustomerField,
    LocalTimeField,
    ScopedModelViewSet,
    ScopedRelatedField,
)
from accounts.models import Role
from accounts.pagination import LargeListPagination
from accounts.permissions import FIELD_ROLES
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionShare,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    Site,
    Task,
)
from sites.services import (
    ConditionError,
    DuplicateChild,
    InUse,
    LinkRefused,
    condition_dimension_create,
    condition_dimension_update,
    deployment_create,
    deployment_update,
    embodiment_create,
    embodiment_update,
    failure_mode_create,
    failure_mode_update,
    site_create,
    site_update,
)
from sites.validators import validate_time_zone


class ActionDimensionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ActionDimension
        fields = ["id", "order", "name", "unit", "min_value", "max_value"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        low, high = attrs.get("min_value"), attrs.get("max_value")
        if low is not None and high is not None and high <= low:
            raise serializers.ValidationError(
                {"max_value": f"Must be above min_value ({low:g}); got {high:g}."}
            )
        return attrs


class CameraSerializer(serializers.ModelSerializer):
    class Meta:
        model = Camera
        fields = ["id", "name", "mount", "width", "height", "fps", "topic", "clock_offset_ms"]


@contextmanager
def duplicates_as_400() -> Iterator[None]:
    """A list given with two rows of one name, or a link to another organization's object,
    is the client's to fix: 400 on that list or field."""
    try:
        yield
    except (DuplicateChild, LinkRefused) as exc:
        raise serializers.ValidationError({exc.field: str(exc)}) from exc


@contextmanager
def in_use_as_409() -> Iterator[None]:
    """Removing what stored work still names conflicts with that work: 409, nothing changed."""
    try:
        yield
    except InUse as exc:
        raise Conflict(str(exc)) from exc


class EmbodimentSerializer(serializers.ModelSerializer):
    action_dimensions = ActionDimensionSerializer(many=True, required=False)
    cameras = CameraSerializer(many=True, required=False)

    class Meta:
        model = Embodiment
        fields = [
            "id",
            "slug",
            "name",
            "morphology",
            "end_effector",
            "control_rate_hz",
            "calibration_threshold",
            "robot_type",
            "description",
            "state_topic",
            "action_topic",
            "action_source",
            "dataset_fps",
            "gap_policy",
            "action_dimensions",
            "cameras",
        ]

    def create(self, validated_data: dict[str, Any]) -> Embodiment:
        with duplicates_as_400():
            return embodiment_create(
                organization=validated_data.pop("organization"),
                actor=self.context["request"].user,
                action_dimensions=validated_data.pop("action_dimensions", []),
                cameras=validated_data.pop("cameras", []),
                fields=validated_data,
            )

    def update(self, instance: Embodiment, validated_data: dict[str, Any]) -> Embodiment:
        with in_use_as_409(), duplicates_as_400():
            return embodiment_update(
                embodiment=instance,
                actor=self.context["request"].user,
                action_dimensions=validated_data.pop("action_dimensions", None),
                cameras=validated_data.pop("cameras", None),
                fields=validated_data,
            )


class EmbodimentViewSet(ScopedModelViewSet):
    audited_by_service = True
    base_queryset = Embodiment.objects.prefetch_related("action_dimensions", "cameras")
    serializer_class = EmbodimentSerializer
    filterset_fields = ["slug", "morphology", "end_effector"]
    search_fields = ["name", "slug", "robot_type"]
    ordering_fields = ["name", "slug"]


class AccessWindowSerializer(serializers.ModelSerializer):
    start_time = LocalTimeField()
    end_time = LocalTimeField()

    class Meta:
        model = AccessWindow
        fields = ["id", "weekday", "start_time", "end_time"]


class SiteSerializer(serializers.ModelSerializer):
    customer = CustomerField(required=False, allow_null=True)
    access_windows = AccessWindowSerializer(many=True, required=False)
    presents = ScopedRelatedField(many=True, queryset=ConditionValue.objects.all(), required=False)

    class Meta:
        model = Site
        fields = [
            "id",
            "slug",
            "name",
            "kind",
            "customer",
            "address",
            "country",
            "region",
            "latitude",
            "longitude",
            "timezone",
            "capacity_episodes_per_day",
            "episode_minutes",
            "setup_hours",
            "cost_per_hour",
            "access_windows",
            "presents",
        ]
        extra_kwargs = {"cost_per_hour": {"min_value": 0}}

    def validate_timezone(self, value: str) -> str:
        return validate_time_zone(value)

    def create(self, validated_data: dict[str, Any]) -> Site:
        with duplicates_as_400():
            return site_create(
                organization=validated_data.pop("organization"),
                actor=self.context["request"].user,
                access_windows=validated_data.pop("access_windows", []),
                presents=validated_data.pop("presents", []),
                fields=validated_data,
            )

    def update(self, instance: Site, validated_data: dict[str, Any]) -> Site:
        with duplicates_as_400():
            return site_update(
                site=instance,
                actor=self.context["request"].user,
                access_windows=validated_data.pop("access_windows", None),
                presents=validated_data.pop("presents", None),
                fields=validated_data,
            )


class SiteViewSet(ScopedModelViewSet):
    audited_by_service = True
    base_queryset = Site.objects.select_related("customer").prefetch_related(
        "access_windows", "presents"
    )
    serializer_class = SiteSerializer
    filterset_fields = ["kind", "country", "customer__slug", "slug"]
    search_fields = ["name", "slug", "address", "region"]
    ordering_fields = ["name", "country"]


class TaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = ["id", "slug", "name", "description"]


class TaskViewSet(ScopedModelViewSet):
    base_queryset = Task.objects.all()
    serializer_class = TaskSerializer
    filterset_fields = ["slug"]
    search_fields = ["name"]


class ConditionShareSerializer(serializers.ModelSerializer):
    value = ScopedRelatedField(queryset=ConditionValue.objects.all())

    class Meta:
        model = ConditionShare
        fields = ["value", "share"]


class DeploymentSerializer(serializers.ModelSerializer):
    customer = CustomerField()
    site = ScopedRelatedField(queryset=Site.objects.all())
    embodiment = ScopedRelatedField(queryset=Embodiment.objects.all())
    task = ScopedRelatedField(queryset=Task.objects.all())
    condition_profile = ConditionShareSerializer(many=True, required=False)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "slug",
            "name",
            "customer",
            "site",
            "embodiment",
            "task",
            "cycles_per_day",
            "reliability_target",
            "started_on",
            "active",
            "condition_profile",
        ]

    def validate_reliability_target(self, value: float) -> float:
        if not 0 < value < 1:
            raise serializers.ValidationError("Must be strictly between 0 and 1, e.g. 0.999.")
        return value

    def create(self, validated_data: dict[str, Any]) -> Deployment:
        profile = validated_data.pop("condition_profile", None)
        try:
            with duplicates_as_400():
                return deployment_create(
                    organization=validated_data.pop("organization"),
                    actor=self.context["request"].user,
                    condition_profile=_shares(profile),
                    fields=validated_data,
                )
        except ConditionError as exc:
            raise serializers.ValidationError({"condition_profile": str(exc)}) from exc

    def update(self, instance: Deployment, validated_data: dict[str, Any]) -> Deployment:
        profile = validated_data.pop("condition_profile", None)
        try:
            with duplicates_as_400():
                return deployment_update(
                    deployment=instance,
                    actor=self.context["request"].user,
                    condition_profile=_shares(profile),
                    fields=validated_data,
                )
        except ConditionError as exc:
            raise serializers.ValidationError({"condition_profile": str(exc)}) from exc


def _shares(profile: list[dict[str, Any]] | None) -> dict[int, float] | None:
    return None if profile is None else {p["value"].pk: p["share"] for p in profile}


class DeploymentViewSet(ScopedModelViewSet):
    audited_by_service = True
    base_queryset = Deployment.objects.select_related("customer").prefetch_related(
        "condition_profile"
    )
    serializer_class = DeploymentSerializer
    filterset_fields = ["customer__slug", "site", "embodiment", "active", "slug"]
    search_fields = ["name", "slug"]
    ordering_fields = ["name", "cycles_per_day"]


class ConditionValueSerializer(serializers.ModelSerializer):
    class Meta:
        model = ConditionValue
        fields = ["id", "slug", "label", "order", "low", "high", "stageable", "setup_instruction"]


class ConditionDimensionSerializer(serializers.ModelSerializer):
    values = ConditionValueSerializer(many=True, required=False)

    class Meta:
        model = ConditionDimension
        fields = [
            "id",
            "slug",
            "name",
            "kind",
            "unit",
            "stageable",
            "order",
            "description",
            "values",
        ]

    def create(self, validated_data: dict[str, Any]) -> ConditionDimension:
        with duplicates_as_400():
            return condition_dimension_create(
                organization=validated_data.pop("organization"),
                actor=self.context["request"].user,
                values=validated_data.pop("values", []),
                fields=validated_data,
            )

    def update(
        self, instance: ConditionDimension, validated_data: dict[str, Any]
    ) -> ConditionDimension:
        # The API adds and updates values by slug and leaves out none: a value left out of
        # the list is kept (the planner's taxonomy page removes values, refusing used ones).
        with in_use_as_409(), duplicates_as_400():
            return condition_dimension_update(
                dimension=instance,
                actor=self.context["request"].user,
                values=validated_data.pop("values", None),
                keep_unlisted=True,
                fields=validated_data,
            )


class ConditionDimensionViewSet(ScopedModelViewSet):
    audited_by_service = True
    base_queryset = ConditionDimension.objects.prefetch_related("values")
    serializer_class = ConditionDimensionSerializer
    filterset_fields = ["slug", "kind", "stageable"]
    search_fields = ["name", "slug"]


class FailureModeSerializer(serializers.ModelSerializer):
    parent = ScopedRelatedField(  # type: ignore[assignment]
        queryset=FailureMode.objects.all(), required=False, allow_null=True
    )
    level = serializers.IntegerField(read_only=True)

    class Meta:
        model = FailureMode
        fields = [
            "id",
            "code",
            "name",
            "parent",
            "level",
            "severity",
            "detectability",
            "description",
        ]

    def create(self, validated_data: dict[str, Any]) -> FailureMode:
        with duplicates_as_400():
            return failure_mode_create(
                organization=validated_data.pop("organization"),
                actor=self.context["request"].user,
                fields=validated_data,
            )

    def update(self, instance: FailureMode, validated_data: dict[str, Any]) -> FailureMode:
        with duplicates_as_400():
            return failure_mode_update(
                failure_mode=instance, actor=self.context["request"].user, fields=validated_data
            )


class FailureModeViewSet(ScopedModelViewSet):
    audited_by_service = True
    base_queryset = FailureMode.objects.all()
    serializer_class = FailureModeSerializer
    filterset_fields = ["code", "parent", "severity"]
    search_fields = ["code", "name"]
    ordering_fields = ["code", "severity"]


class FailureRecordSerializer(serializers.ModelSerializer):
    deployment = ScopedRelatedField(queryset=Deployment.objects.all())
    failure_mode = ScopedRelatedField(queryset=FailureMode.objects.all())

    class Meta:
        model = FailureRecord
        fields = [
            "id",
            "deployment",
            "failure_mode",
            "condition_set",
            "occurred_at",
            "intervention",
            "external_id",
            "notes",
        ]
        read_only_fields = ["condition_set"]


class FailureRecordViewSet(ScopedModelViewSet):
    base_queryset = FailureRecord.objects.all()
    serializer_class = FailureRecordSerializer
    filterset_fields = {
        "deployment": ["exact"],
        "failure_mode": ["exact"],
        "intervention": ["exact"],
        "occurred_at": ["gte", "lt"],
    }
    pagination_class = LargeListPagination
    # Field teams report failures they see; correcting or removing a record is the manager's.
    read_roles = frozenset({Role.MANAGER, Role.FIELD, Role.VIEWER})
    action_roles = {"create": FIELD_ROLES}
