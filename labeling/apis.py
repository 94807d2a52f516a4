"""REST API for the training-data inventory: imports, datasets and episodes."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import ScopedViewSetMixin
from accounts.models import membership_of
from accounts.pagination import LargeListPagination
from accounts.parsers import FormParser, JSONParser, MultiPartParser
from accounts.permissions import MANAGERS
from labeling.importers.errors import ImportFailed
from labeling.importers.sources import FORMATS
from labeling.models import Dataset, Episode, InventoryImport
from labeling.selectors import DatasetBreakdown, dataset_breakdown, datasets_with_totals
from labeling.services import (
    inventory_import_cancel,
    inventory_import_start,
    inventory_upload_discard,
    inventory_upload_store,
)


class ImportProblemSerializer(serializers.Serializer):
    """One problem: where (file, row, column) and what; ``text`` says it all in one line."""

    file = serializers.CharField(allow_null=True, required=False)
    row = serializers.IntegerField(allow_null=True, required=False)
    column = serializers.CharField(allow_null=True, required=False)
    message = serializers.CharField(default="")
    text = serializers.CharField(allow_null=True, required=False)


class InventoryImportSerializer(serializers.ModelSerializer):
    status = serializers.CharField(source="job.status", read_only=True)
    progress_done = serializers.IntegerField(source="job.progress_done", read_only=True)
    progress_total = serializers.IntegerField(
        source="job.progress_total", read_only=True, allow_null=True
    )
    percent = serializers.IntegerField(source="job.percent", read_only=True, allow_null=True)
    message = serializers.CharField(source="job.message", read_only=True)
    problems = ImportProblemSerializer(source="job.errors", many=True, read_only=True)
    problems_total = serializers.SerializerMethodField()
    job = serializers.UUIDField(source="job_id", read_only=True)
    started_at = serializers.DateTimeField(source="job.started_at", read_only=True, allow_null=True)
    finished_at = serializers.DateTimeField(
        source="job.finished_at", read_only=True, allow_null=True
    )

    class Meta:
        model = InventoryImport
        fields = [
            "id",
            "dataset_name",
            "dataset",
            "source_name",
            "format",
            "options",
            "job",
            "status",
            "progress_done",
            "progress_total",
            "percent",
            "message",
            "problems",
            "problems_total",
            "summary",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField())
    def get_problems_total(self, obj: InventoryImport) -> int:
        return int((obj.summary or {}).get("problems_total") or len(obj.job.errors or []))


class _PairsField(serializers.JSONField):
    """COLUMN→TARGET pairs: a JSON object, a JSON list of "A=B" strings, or such a string."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            text = data.strip()
            if not text:
                return []
            if text[0] in "[{":
                try:
                    data = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise serializers.ValidationError(f"invalid JSON ({exc.msg})") from None
            else:
                data = [text]
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
        if isinstance(data, list) and all(isinstance(i, str) for i in data):
            return data
        raise serializers.ValidationError('expected {"COLUMN": "TARGET"} or ["COLUMN=TARGET", ...]')


class InventoryImportCreateSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="A CSV/TSV/Parquet manifest, or a LeRobot dataset as .zip or .tar.gz "
        "(the archive holds the dataset root with meta/)."
    )
    dataset = serializers.CharField(max_length=200, help_text="Dataset name; created if new.")
    format = serializers.ChoiceField(choices=FORMATS, required=False, allow_blank=True)
    mapping = _PairsField(required=False, help_text='{"COLUMN": "TARGET"} or ["COLUMN=TARGET"]')
    map = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="COLUMN=TARGET, repeatable"
    )
    sets = _PairsField(required=False, help_text='{"DIMENSION": "VALUE"} for every episode')
    set = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="DIMENSION=VALUE, repeatable"
    )
    create_values = serializers.BooleanField(required=False, default=False)
    embodiment = serializers.CharField(required=False, allow_blank=True)
    site = serializers.CharField(required=False, allow_blank=True)


def _pairs_list(value: Any, extra: list[str] | None) -> list[str] | dict[str, str]:
    items: list[str] = []
    if isinstance(value, dict):
        items = [f"{k}={v}" for k, v in value.items()]
    elif isinstance(value, list):
        items = list(value)
    return items + list(extra or [])


class InventoryImportViewSet(
    ScopedViewSetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Inventory imports: upload a manifest or LeRobot dataset, follow its progress, cancel."""

    base_queryset = InventoryImport.objects.select_related("job", "dataset")
    serializer_class = InventoryImportSerializer
    parser_classes = [MultiPartParser, FormParser, JSONParser]
    filterset_fields = ["format", "dataset"]
    ordering_fields = ["created_at"]
    read_roles = MANAGERS

    @extend_schema(
        request=InventoryImportCreateSerializer, responses={202: InventoryImportSerializer}
    )
    def create(self, request: Request) -> Response:
        incoming = InventoryImportCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        membership = membership_of(request.user)
        assert membership is not None  # the permission class guarantees it
        path = inventory_upload_store(upload=data["file"])
        try:
            record = inventory_import_start(
                organization=membership.organization,
                dataset_name=data["dataset"],
                path=path,
                source_name=data["file"].name,
                format=data.get("format") or None,
                mapping=_pairs_list(data.get("mapping"), data.get("map")),
                sets=_pairs_list(data.get("sets"), data.get("set")),
                create_values=data.get("create_values", False),
                embodiment=data.get("embodiment") or None,
                site=data.get("site") or None,
                created_by=request.user,
            )
        except ImportFailed as exc:
            inventory_upload_discard(path=path)
            return Response(
                {"detail": exc.summary(), "problems": [p.as_dict() for p in exc.problems]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        record = self.base_queryset.get(pk=record.pk)
        return Response(InventoryImportSerializer(record).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses=InventoryImportSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        record = self.get_object()
        inventory_import_cancel(inventory_import=record)
        record = self.base_queryset.get(pk=record.pk)
        return Response(InventoryImportSerializer(record).data)


class DimensionCountSerializer(serializers.Serializer):
    dimension = serializers.CharField()
    values = serializers.DictField(child=serializers.IntegerField())
    not_recorded = serializers.IntegerField()


class SiteCountSerializer(serializers.Serializer):
    site = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    episodes = serializers.IntegerField()
    frames = serializers.IntegerField()


class DatasetSerializer(serializers.ModelSerializer):
    rows = serializers.IntegerField(source="n_rows", read_only=True)
    episodes = serializers.IntegerField(source="n_episodes", read_only=True, allow_null=True)
    frames = serializers.IntegerField(source="n_frames", read_only=True, allow_null=True)

    class Meta:
        model = Dataset
        fields = [
            "id",
            "slug",
            "name",
            "source",
            "description",
            "embodiment",
            "fps",
            "format_version",
            "rows",
            "episodes",
            "frames",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class DatasetDetailSerializer(DatasetSerializer):
    conditions = serializers.SerializerMethodField()
    sites = serializers.SerializerMethodField()

    class Meta(DatasetSerializer.Meta):
        fields = [*DatasetSerializer.Meta.fields, "metadata", "conditions", "sites"]
        read_only_fields = fields

    def _breakdown(self, obj: Dataset) -> DatasetBreakdown:
        cached: dict[int, DatasetBreakdown] = self.__dict__.setdefault("_breakdowns", {})
        if obj.pk not in cached:
            cached[obj.pk] = dataset_breakdown(dataset_id=obj.pk)
        return cached[obj.pk]

    @extend_schema_field(DimensionCountSerializer(many=True))
    def get_conditions(self, obj: Dataset) -> list[dict[str, Any]]:
        return [
            {
                "dimension": d.name,
                "values": {v.label: v.episodes for v in d.values},
                "not_recorded": d.not_recorded,
            }
            for d in self._breakdown(obj).dimensions
        ]

    @extend_schema_field(SiteCountSerializer(many=True))
    def get_sites(self, obj: Dataset) -> list[dict[str, Any]]:
        return [
            {"site": s.site_id, "name": s.name, "episodes": s.episodes, "frames": s.frames}
            for s in self._breakdown(obj).sites
        ]


class DatasetViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Datasets with their episode totals; the detail adds episodes per condition and site."""

    base_queryset = Dataset.objects.all()
    # As the inventory pages: the training-data inventory is the manager's.
    read_roles = MANAGERS
    filterset_fields = ["source", "slug", "embodiment"]
    search_fields = ["name", "slug"]
    ordering_fields = ["name", "updated_at"]

    def get_queryset(self) -> Any:
        return datasets_with_totals(super().get_queryset()).order_by("name", "pk")

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return DatasetDetailSerializer if self.action == "retrieve" else DatasetSerializer


class EpisodeSerializer(serializers.ModelSerializer):
    condition_values = serializers.SerializerMethodField()

    class Meta:
        model = Episode
        fields = [
            "id",
            "dataset",
            "key",
            "episode_count",
            "frames",
            "duration_s",
            "outcome",
            "site",
            "embodiment",
            "task",
            "condition_set",
            "condition_values",
            "failure_mode",
            "storage_uri",
            "provenance",
            "failure_record",
            "sync_status",
            "label_status",
            "validated",
            "features",
            "extra",
            "recorded_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_condition_values(self, obj: Episode) -> list[int]:
        return list(obj.condition_set.value_ids) if obj.condition_set is not None else []


class EpisodeViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Episodes (rows of the inventory), cursor-paginated: filter with ``?dataset=<id>``."""

    base_queryset = Episode.objects.select_related("condition_set")
    serializer_class = EpisodeSerializer
    # Annotators work through their assignments; the raw inventory (with accepted and gold
    # labels) is for managers, so a gold episode's answer cannot be looked up.
    read_roles = MANAGERS
    pagination_class = LargeListPagination
    filterset_fields = ["dataset", "site", "embodiment", "task", "outcome", "label_status"]
    ordering_fields: list[str] = []
