"""The field surface: a team's tasks, for tablets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from django.views.generic import TemplateView

from accounts.models import Role
from campaigns.models import CollectionTask, FieldTeam
from frontend.views.base import MemberView


class FieldToday(MemberView, TemplateView):
    roles = frozenset({Role.FIELD, Role.MANAGER})
    template_name = "frontend/field/today.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        today = timezone.localdate()
        tasks = list(
            CollectionTask.objects.visible_to(self.request.user)
            .filter(
                status__in=[
                    CollectionTask.Status.PUBLISHED,
                    CollectionTask.Status.IN_PROGRESS,
                    CollectionTask.Status.BLOCKED,
                ],
                scheduled_date__gte=today - timedelta(days=1),
            )
            .select_related("site", "team", "round__campaign", "embodiment")
            .order_by("scheduled_date", "start_at")[:50]
        )
        return super().get_context_data(
            today=today,
            todays=[t for t in tasks if t.scheduled_date == today],
            upcoming=[t for t in tasks if t.scheduled_date and t.scheduled_date > today],
            teams=list(FieldTeam.objects.filter(members=self.request.user.pk)),
            **kwargs,
        )
