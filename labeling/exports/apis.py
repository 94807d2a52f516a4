"""REST API for dataset exports: start one, follow it, download the zip. Scoped to the
caller's organization; managers only (a download holds every accepted label)."""

from __future__ import annotations

from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.apis import ScopedRelatedField, ScopedViewSetMixin
from accounts.permissions import MANAGERS
from labeling.exports.services import FORMATS, ExportError, dataset_export_start, export_file
from labeling.models import Dataset, DatasetExport


class DatasetExportSerializer(serializers.ModelSerializer):
    dataset_name = serializers.CharField(source="dataset.name", read_only=True)
    status = serializers.CharField(source="job.status", read_only=True)
    job = serializers.UUIDField(source="job_id", read_only=True)
    percent = serializers.IntegerField(source="job.percent", read_only=True, allow_null=True)
    message = serializers.CharField(source="job.message", read_only=True)
    download = serializers.SerializerMethodField()

    class Meta:
        model = DatasetExport
        fields = [
            "id",
            "dataset",
            "dataset_name",
            "format",
            "job",
            "status",
            "percent",
            "message",
            "summary",
            "download",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download(self, obj: DatasetExport) -> str | None:
        if not obj.path or obj.job.status != "succeeded":
            return None
        url = f"/api/exports/{obj.pk}/download/"
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url


class DatasetExportCreateSerializer(serializers.Serializer):
    dataset = ScopedRelatedField(queryset=Dataset.objects.all())
    format = serializers.ChoiceField(choices=FORMATS)


class DatasetExportViewSet(
    ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet
):
    """Exports of a dataset's synchronised, accepted episodes (LeRobot v3.0 / v2.1, Parquet,
    CSV). ``POST`` starts one (202; it runs in the background) and ``download`` fetches the
    zip when it has succeeded. The summary counts what was left out and why."""

    base_queryset = DatasetExport.objects.select_related("job", "dataset")
    serializer_class = DatasetExportSerializer
    filterset_fields = ["dataset", "format"]
    # As the export pages: a download holds every accepted label, gold episodes' included.
    read_roles = MANAGERS

    @extend_schema(request=DatasetExportCreateSerializer, responses={202: DatasetExportSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        incoming = DatasetExportCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        try:
            export = dataset_export_start(
                dataset=incoming.validated_data["dataset"],
                format=incoming.validated_data["format"],
                actor=request.user,
            )
        except ExportError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        export = self.base_queryset.get(pk=export.pk)
        return Response(
            DatasetExportSerializer(export, context={"request": request}).data,
            status=status.HTTP_202_ACCEPTED,
        )

    @extend_schema(
        request=None,
        responses={
            (200, "application/zip"): OpenApiResponse(
                response=OpenApiTypes.BINARY, description="The export as a zip archive."
            ),
            409: OpenApiResponse(description="The export has not succeeded (yet)."),
        },
    )
    @action(detail=True, methods=["get"])
    def download(self, request: Request, pk: str | None = None) -> Any:
        export = self.get_object()
        if export.job.status != "succeeded":
            return Response(
                {"detail": f"The export is {export.job.get_status_display().lower()}."},
                status=status.HTTP_409_CONFLICT,
            )
        path = export_file(export)
        return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
