"""API plumbing every app shares: scoped viewsets and scoped relation fields."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.db import IntegrityError, models, transaction
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Job, Organization, membership_of


@extend_schema_field(
    {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9](:[0-5][0-9])?$", "example": "08:00:00"}
)
class LocalTimeField(serializers.TimeField):
    """A wall-clock time at a site (no offset: it is in the site's own time zone)."""


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
        with unique_violations_as_400(model):
            if any(f.name == "organization" for f in model._meta.fields):
                serializer.save(organization=membership.organization)
            else:
                serializer.save()

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        with unique_violations_as_400(serializer.Meta.model):  # type: ignore[attr-defined]
            serializer.save()


@contextmanager
def unique_violations_as_400(model: Any) -> Iterator[None]:
    """Turn a unique-constraint violation into a 400 naming the fields that must be unique.

    The organization is set by the view, not the client, so DRF's own uniqueness validators
    cannot see these constraints; the database is the one place they are enforced.
    """
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        name = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") or ""
        for constraint in model._meta.constraints:
            if constraint.name == name and getattr(constraint, "fields", None):
                fields = [f for f in constraint.fields if f != "organization"]
                raise ValidationError(
                    {
                        f: [f"A {model._meta.verbose_name} with this {f} already exists."]
                        for f in fields
                    }
                ) from exc
        raise ValidationError(
            {"detail": f"This conflicts with an existing {model._meta.verbose_name}."}
        ) from exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus: input the database cannot store (NUL bytes, out-of-range numbers) is a 400."""
    from django.db import DataError
    from rest_framework.views import exception_handler as drf_handler

    if isinstance(exc, DataError):
        return Response({"detail": f"Invalid value: {str(exc).splitlines()[0]}"}, status=400)
    return drf_handler(exc, context)


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
