"""API plumbing every app shares: scoped viewsets and scoped relation fields."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.db import IntegrityError, models, transaction
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Job, Organization, membership_of
from accounts.permissions import MANAGERS


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
    """Querysets through ``visible_to``; new rows belong to the caller's organization.

    Writes are audited here as ``api_<verb>``, unless ``audited_by_service``: then the
    serializer's service records its own event.
    """

    request: Any
    base_queryset: Any
    audited_by_service = False

    def get_queryset(self) -> models.QuerySet[Any]:
        return cast(models.QuerySet[Any], self.base_queryset.visible_to(self.request.user))

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        membership = membership_of(self.request.user)
        assert membership is not None  # the permission class guarantees it
        model = serializer.Meta.model  # type: ignore[attr-defined]
        same_customer_check(serializer)
        with unique_violations_as_400(model):
            if any(f.name == "organization" for f in model._meta.fields):
                instance = serializer.save(organization=membership.organization)
            else:
                instance = serializer.save()
            if not self.audited_by_service:
                _audit(self.request, "create", instance, serializer.validated_data)

    def perform_update(self, serializer: serializers.BaseSerializer) -> None:
        same_customer_check(serializer)
        with unique_violations_as_400(serializer.Meta.model):  # type: ignore[attr-defined]
            instance = serializer.save()
            if not self.audited_by_service:
                _audit(self.request, "update", instance, serializer.validated_data)

    def perform_destroy(self, instance: Any) -> None:
        from django.db.models import ProtectedError

        try:
            with transaction.atomic():
                _audit(self.request, "delete", instance, {})
                instance.delete()
        except ProtectedError as exc:
            raise Conflict(_still_used(instance, exc)) from exc


def customer_of(obj: Any) -> int | None:
    """The customer organization an object belongs to, by its queryset's ``customer_path``
    (None for objects no customer owns, such as a partner's collection site)."""
    if isinstance(obj, Organization):
        return obj.pk if obj.kind == Organization.Kind.CUSTOMER else None
    path = getattr(type(obj)._default_manager.get_queryset(), "customer_path", None)
    if not path:
        return None
    *hops, last = path.split("__")
    value = obj
    for hop in hops:
        value = getattr(value, hop, None)
        if value is None:
            return None
    return cast(int | None, getattr(value, f"{last}_id", None))


def same_customer_check(serializer: serializers.BaseSerializer) -> None:
    """Refuse a write that links objects of different customers, or moves an object to
    another customer: 400 naming each field whose object belongs elsewhere.

    The object's customer is the stored one (a write never moves an object to another
    customer) or, for a new object, the one its model's ``customer_path`` leads to. Every
    related field of the serializer counts, with its new value or, when the write leaves it
    alone, the stored one. Objects no customer owns link freely.
    """
    from rest_framework.relations import ManyRelatedField, RelatedField

    instance = serializer.instance
    data = serializer.validated_data  # type: ignore[attr-defined]
    links: list[tuple[str, Any]] = []
    for name, field in serializer.fields.items():  # type: ignore[attr-defined]
        if field.read_only or not isinstance(field, RelatedField | ManyRelatedField):
            continue
        source = cast(str, field.source)
        if source in data:
            value = data[source]
        elif instance is not None and not isinstance(field, ManyRelatedField):
            value = getattr(instance, source, None)
        elif instance is not None:
            value = list(getattr(instance, source).all())
        else:
            continue
        for obj in value if isinstance(value, list | tuple) else [value]:
            if obj is not None and customer_of(obj) is not None:
                links.append((name, obj))
    owner = customer_of(instance) if instance is not None else _owner_of_new(serializer, data)
    if owner is None:
        return
    foreign = [(name, obj, customer_of(obj)) for name, obj in links if customer_of(obj) != owner]
    if not foreign:
        return
    ids = [owner, *(theirs for _, _, theirs in foreign if theirs is not None)]
    names: dict[int | None, str] = dict(
        Organization.objects.filter(pk__in=ids).values_list("pk", "name")
    )
    errors: dict[str, list[str]] = {}
    for name, obj, theirs in foreign:
        errors.setdefault(name, []).append(
            f"{str(obj._meta.verbose_name).capitalize()} '{obj}' belongs to customer "
            f"{names.get(theirs, theirs)}, not {names.get(owner, owner)}: a write links "
            "objects of one customer only."
        )
    raise ValidationError(errors)


def _owner_of_new(serializer: serializers.BaseSerializer, data: dict[str, Any]) -> int | None:
    """The customer a new object will belong to, by its model's ``customer_path`` (None for
    objects no customer owns, which may then link objects of several customers)."""
    model = serializer.Meta.model  # type: ignore[attr-defined]
    path = getattr(model._default_manager.get_queryset(), "customer_path", None)
    if not path:
        return None
    hop = path.split("__")[0]
    value = data.get(hop)
    if value is None or isinstance(value, list | tuple):
        return None
    return customer_of(model(**{hop: value}))


class Conflict(APIException):
    status_code = 409
    default_detail = "The change conflicts with the current state."


def _still_used(instance: models.Model, exc: Exception) -> str:
    from collections import Counter

    users = Counter(
        str(obj._meta.verbose_name_plural) for obj in getattr(exc, "protected_objects", ())
    )
    listed = ", ".join(f"{n} {name}" for name, n in sorted(users.items()))
    return (
        f"{str(instance._meta.verbose_name).capitalize()} '{instance}' is still used by {listed}; "
        "remove or move those first."
    )


def _audit(request: Request, verb: str, instance: models.Model, data: Any) -> None:
    """Record a generic API write in the audit trail, with the fields the client sent."""
    from accounts.services import audit_record

    membership = membership_of(request.user)
    if membership is None:
        return
    changes = {
        name: (
            [getattr(v, "pk", v) for v in value]
            if isinstance(value, list | tuple)
            else getattr(value, "pk", value)
        )
        for name, value in dict(data or {}).items()
    }
    audit_record(
        organization=membership.organization,
        actor=request.user,
        verb=f"api_{verb}",
        obj=instance,
        changes=changes,
    )


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


class JobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True, allow_null=True)
    elapsed_seconds = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="How long the job has run (null before it starts).",
    )
    remaining_seconds = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="While an import, export or conversion runs (steps that cost alike), how "
        "long it would still take at its pace so far: the time run times the work left over "
        "the work done. Null for other kinds, when not running, or with no progress yet.",
    )

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
            "elapsed_seconds",
            "remaining_seconds",
        ]
        read_only_fields = fields


class JobViewSet(
    ScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Long-running work (imports, reports, plans, exports) and its progress."""

    base_queryset = Job.objects.all()
    serializer_class = JobSerializer
    # Imports, reports, plans and exports are started and followed on the manager's pages.
    read_roles = MANAGERS
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
