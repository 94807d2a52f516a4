"""The annotator's queue."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, Sum
from django.views.generic import TemplateView

from accounts.models import Role
from frontend.views.base import MemberView
from labeling.models import Dataset, Episode


class LabelQueue(MemberView, TemplateView):
    roles = frozenset({Role.ANNOTATOR, Role.MANAGER})
    template_name = "frontend/label/queue.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        pending = Q(
            episodes__label_status__in=[
                Episode.LabelStatus.UNLABELLED,
                Episode.LabelStatus.IN_PROGRESS,
            ]
        )
        datasets = (
            Dataset.objects.visible_to(self.request.user)
            .filter(source=Dataset.Source.CAPTURED)
            .annotate(
                n_episodes=Count("episodes"),
                n_pending=Count("episodes", filter=pending),
                n_accepted=Count(
                    "episodes", filter=Q(episodes__label_status=Episode.LabelStatus.ACCEPTED)
                ),
            )
            .order_by("-updated_at")
        )
        inventory = Dataset.objects.visible_to(self.request.user).aggregate(
            total=Sum("episodes__episode_count")
        )
        return super().get_context_data(datasets=datasets, inventory=inventory, **kwargs)
