"""Tenants, memberships, background jobs and the audit trail.

Tenancy: an *operator* organization runs campaigns and owns the world model it works in
(sites, embodiments, datasets, teams). A *customer* organization owns deployments and
campaigns run for it; its members (viewers) see only objects whose customer is their
organization, read-only. Every domain QuerySet derives from :class:`TenantQuerySet`, so the
same two lookups scope views, APIs and admin lists alike.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, cast

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class Organization(models.Model):
    class Kind(models.TextChoices):
        OPERATOR = "operator", "Operator"
        CUSTOMER = "customer", "Customer"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    operator = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="customers",
        help_text="For a customer: the operator organization that runs its campaigns.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="organization_kind_valid", condition=Q(kind__in=["operator", "customer"])
            ),
            models.CheckConstraint(
                name="organization_operator_only_for_customers",
                condition=Q(kind="customer") | Q(operator__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_operator(self) -> bool:
        return self.kind == self.Kind.OPERATOR


class Role(models.TextChoices):
    MANAGER = "manager", "Programme manager"
    FIELD = "field", "Field team member"
    ANNOTATOR = "annotator", "Annotator"
    VIEWER = "viewer", "Viewer (read-only)"


class Membership(models.Model):
    """A user's single membership: which organization they act for, in which role."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                name="membership_role_valid",
                condition=Q(role__in=["manager", "field", "annotator", "viewer"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.role} at {self.organization}"


def membership_of(user: AbstractBaseUser | AnonymousUser | None) -> Membership | None:
    """Return the user's membership (cached on the user object), or None."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    cached: Any = getattr(user, "_fieldcraft_membership", False)
    if cached is not False:
        return cast(Membership | None, cached)
    user_id = cast(int, user.pk)
    membership = Membership.objects.select_related("organization").filter(user_id=user_id).first()
    user._fieldcraft_membership = membership  # type: ignore[union-attr]
    return membership


class TenantQuerySet(models.QuerySet):
    """A QuerySet that knows how to scope itself to a user.

    ``operator_path`` is the lookup to the operator organization that owns the row;
    ``customer_path`` the lookup to the customer organization it belongs to, or None when
    customers never see this kind of object.
    """

    operator_path: ClassVar[str] = "organization"
    customer_path: ClassVar[str | None] = None

    def for_organization(self, organization: Organization | int) -> TenantQuerySet:
        org_id = organization if isinstance(organization, int) else organization.pk
        if self.customer_path:
            return self.filter(
                Q(**{self.operator_path: org_id}) | Q(**{self.customer_path: org_id})
            )
        return self.filter(**{self.operator_path: org_id})

    def visible_to(self, user: Any) -> TenantQuerySet:
        """Scope to what ``user`` may see; an unknown or foreign object is simply absent."""
        if user is not None and getattr(user, "is_superuser", False):
            return self.all()
        membership = membership_of(user)
        if membership is None:
            return self.none()
        if membership.organization.kind == Organization.Kind.OPERATOR:
            return self._visible_to_operator_member(membership)
        if self.customer_path is None:
            return self.none()
        return self._visible_to_customer_member(membership)

    def _visible_to_operator_member(self, membership: Membership) -> TenantQuerySet:
        return self.filter(**{self.operator_path: membership.organization_id})

    def _visible_to_customer_member(self, membership: Membership) -> TenantQuerySet:
        assert self.customer_path is not None
        return self.filter(**{self.customer_path: membership.organization_id})


EVEN_PACED_KINDS: frozenset[str] = frozenset({"import", "export", "conversion"})
"""Kinds of job whose progress counts steps that cost alike (manifest rows, episodes
exported or converted), so that the pace so far tells how long the rest will take. The
others count stages of unequal cost (a forecast's steered rounds take ten times its other
strategies', a refit's sampler runs before its refits): a pace read off them would mislead,
and they say what they can in their own messages."""


class Job(models.Model):
    """A long-running piece of work (import, report, plan, export) and its progress.

    Pages and the API poll this row. ``task_name`` + ``task_kwargs`` let the stale-job
    reaper re-dispatch work whose worker died; the services a job runs are idempotent.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=32)
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    task_name = models.CharField(max_length=200, blank=True)
    task_kwargs = models.JSONField(default=dict, blank=True)
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(null=True, blank=True)
    message = models.TextField(blank=True)
    errors = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Where the steps now counted began: the first progress with a total, or the first
    # after the count went back (a new phase counts its own steps). The time left is read
    # at the pace since then, so a phase counted with no total (an export reading its
    # episodes before writing them) does not slow the pace of the steps that follow.
    paced_at = models.DateTimeField(null=True, blank=True)
    paced_done = models.BigIntegerField(default=0)
    # When the service expects to end, set by one that can tell while its steps cannot: an
    # import checking and writing its staged rows in single statements, at the pace its
    # organization's earlier imports took to do so (:meth:`JobContext.expect`).
    expected_end_at = models.DateTimeField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "kind", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                name="job_status_valid",
                condition=Q(status__in=["queued", "running", "succeeded", "failed", "cancelled"]),
            ),
            models.CheckConstraint(
                name="job_progress_nonnegative", condition=Q(progress_done__gte=0)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.title or self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def percent(self) -> int | None:
        if not self.progress_total:
            return None
        return min(100, int(100 * self.progress_done / self.progress_total))

    def seconds_elapsed(self, now: datetime | None = None) -> float | None:
        """How long the job has run: from its start to its end, or to ``now`` (default the
        present) while it runs; ``None`` before it started."""
        if self.started_at is None:
            return None
        end = self.finished_at or now or timezone.now()
        return max((end - self.started_at).total_seconds(), 0.0)

    def seconds_left(self, now: datetime | None = None) -> float | None:
        """While it runs, how long it would still take: until :attr:`expected_end_at` when
        its service expects an end (0 once that has passed), else at its pace so far — the
        time since its steps began to be counted (:attr:`paced_at`, else its start) times
        the steps left over the steps counted since. The pace only for the kinds whose steps
        cost alike (:data:`EVEN_PACED_KINDS`: rows, episodes); ``None`` for the others and
        when it is not running or has no start, no total or no step counted yet to measure
        a pace by.
        """
        if self.status == self.Status.RUNNING and self.expected_end_at is not None:
            return max((self.expected_end_at - (now or timezone.now())).total_seconds(), 0.0)
        if (
            self.kind not in EVEN_PACED_KINDS
            or self.status != self.Status.RUNNING
            or self.started_at is None
            or not self.progress_total
        ):
            return None
        since, base = (self.paced_at, self.paced_done) if self.paced_at else (self.started_at, 0)
        counted = self.progress_done - base
        if counted <= 0:
            return None
        elapsed = max(((now or timezone.now()) - since).total_seconds(), 0.0)
        left = max(self.progress_total - self.progress_done, 0)
        return elapsed * left / counted

    @property
    def elapsed_seconds(self) -> float | None:
        """:meth:`seconds_elapsed` now (the API's field)."""
        return self.seconds_elapsed()

    @property
    def remaining_seconds(self) -> float | None:
        """:meth:`seconds_left` now (the API's field)."""
        return self.seconds_left()


class AuditEvent(models.Model):
    """Who changed which plan, target, task or label, and when."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="audit_events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    verb = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["organization", "object_type", "object_id"])]

    def __str__(self) -> str:
        return (
            f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.verb} {self.object_type} {self.object_id}"
        )
