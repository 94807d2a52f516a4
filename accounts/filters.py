"""The list filter backend: a relation filter never tells which ids exist elsewhere.

django-filter built a relation filter (``?campaign=12``) over every row of the related model:
an id that does not exist was a 400 "Select a valid choice", while another organization's id
was valid and matched nothing (an empty list), so the difference told which ids exist. And
the browsable API's filter form listed every organization's objects as choices. Here the
choices are the caller's own objects, and an id that is not among them, whether it exists
elsewhere or nowhere, matches nothing: an empty list either way.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.forms.utils import ErrorDict
from django_filters import rest_framework as filters
from django_filters.filters import QuerySetRequestMixin
from django_filters.utils import translate_validation
from rest_framework.exceptions import ParseError

from accounts.models import membership_of
from accounts.parsers import query_refusal


def visible_choices(queryset: models.QuerySet[Any], user: Any) -> models.QuerySet[Any]:
    """The part of ``queryset`` that ``user`` may pick in a filter (nothing when unknown)."""
    visible_to = getattr(queryset, "visible_to", None)
    if visible_to is not None:
        return visible_to(user)  # type: ignore[no-any-return]
    if getattr(user, "is_superuser", False):
        return queryset
    membership = membership_of(user)
    if membership is None:
        return queryset.none()
    if queryset.model is get_user_model():
        # People are chosen among the members of the caller's own organization.
        return queryset.filter(membership__organization_id=membership.organization_id)
    raise TypeError(
        f"{queryset.model.__name__} has no visible_to(): a filter over it cannot be scoped."
    )


class ScopedFilterSet(filters.FilterSet):
    """A FilterSet whose relation filters offer only the objects the request's user may see."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        user = getattr(self.request, "user", None)
        for filter_ in self.filters.values():
            if isinstance(filter_, QuerySetRequestMixin) and isinstance(
                filter_.queryset, models.QuerySet
            ):
                filter_.queryset = visible_choices(filter_.queryset, user)


class DjangoFilterBackend(filters.DjangoFilterBackend):
    """django-filter's backend with :class:`ScopedFilterSet`: an unknown id in a relation
    filter matches nothing. Refuses a query string holding lone surrogates (an error that
    echoes one could not be encoded)."""

    filterset_base = ScopedFilterSet

    def filter_queryset(self, request: Any, queryset: Any, view: Any) -> Any:
        refusal = query_refusal(request.query_params)
        if refusal:
            raise ParseError(refusal)
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        if filterset.is_valid():
            return filterset.qs
        errors = filterset.form.errors
        unknown_ids = {
            name
            for name, problems in errors.as_data().items()
            if isinstance(filterset.filters.get(name), QuerySetRequestMixin)
            and all(problem.code == "invalid_choice" for problem in problems)
        }
        others = ErrorDict({k: v for k, v in errors.items() if k not in unknown_ids})
        if others:
            raise translate_validation(others)
        return queryset.none()
