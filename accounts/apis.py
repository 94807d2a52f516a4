"""API plumbing every app shares: scoped viewsets and scoped relation fields."""

from __future__ import annotations

from typing import Any, cast

from django.db import models
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Job, Organization, membership_of


class ScopedRelatedField(serializers.PrimaryKeyRelatedField):
    """A foreign key that accepts only objects the requesting user may see."""

    def get_queryset(self) -> models.QuerySet[Any]:
        qs: Any = super().get_queryset()
        request = self.context.get("request")
        if request is None or qs is None:
            return (
                cast(models.QuerySet[Any], qs.none())
                if qs is not None
                else models.QuerySet().none()
            )
        return cast(models.QuerySet[Any], qs.visible_to(request.user))


class CustomerField(serializers.SlugRelatedField):
    """A customer organization served by the requesting operator, by slug."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("slug_field", "slug")
        kwargs.setdefault("queryset", Organization.objects.filter(kind=Organization.Kind.CUSTOMER))
        super().__init__(**kwargs)

    def get_queryset(self) -> models.QuerySet[Any]:
        request = self.context.get("request")
        membership = membership_of(request.user) if request else None
        if membership is None:
            return Organization.objects.none()
        return Organization.objects.filter(
            kind=Organization.Kind.CUSTOMER, operator_id=membership.organization_id
        )


class ScopedViewSetMixin:
    """Querysets through ``visible_to``; new rows belong to the caller's organization."""

    request: Any
    base_queryset: Any

    def get_queryset(self) -> models.QuerySet[Any]:
        return cast(models.QuerySet[Any], self.base_queryset.visible_to(self.request.user))

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        membership = membership_of(self.request.user)
        assert membership is not None  # the permission class guarantees it
        model = serializer.Meta.model  # type: ignore[attr-defined]
        if any(f.name == "organization" for f in model._meta.fields):
            serializer.save(organization=membership.organization)
        else:
            serializer.save()


class ScopedModelViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    pass


class ScopedReadOnlyViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    pass


class JobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "title",
            "status",
            "progress_done",
            "progress_total",
            "percent",
            "message",
            "errors",
            "result",
            "attempts",
            "cancel_requested",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class JobViewSet(
    ScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Long-running work (imports, reports, plans, exports) and its progress."""

    base_queryset = Job.objects.all()
    serializer_class = JobSerializer
    filterset_fields = ["kind", "status"]
    ordering_fields = ["created_at"]

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        from accounts.services import job_cancel

        job = self.get_object()
        job_cancel(job=job)
        job.refresh_from_db()
        return Response(JobSerializer(job).data)
