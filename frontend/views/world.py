"""Managers edit the world: sites, deployments, embodiments, condition dimensions and failure
modes, each through the ``sites`` service the API calls (forms in ``frontend.forms.world``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from django.contrib import messages
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.generic import TemplateView
from rest_framework.exceptions import ValidationError as ApiInvalid

from accounts.apis import unique_violations_as_400
from frontend.forms.world import (
    AccessWindowFormSet,
    ActionDimensionFormSet,
    CameraFormSet,
    ConditionDimensionForm,
    ConditionValueFormSet,
    DeploymentForm,
    EmbodimentForm,
    FailureModeForm,
    ScopedForm,
    SiteForm,
)
from frontend.views.base import MANAGERS, MemberView
from sites.models import ConditionDimension, Deployment, Embodiment, FailureMode, Site
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


class WorldFormView(MemberView, TemplateView):
    """Create (no ``pk``) or edit (``pk``, fetched through the organization's queryset) one
    object of ``model`` with ``form_class`` and its child lists' ``formsets``.

    A valid post calls :meth:`save` (one service call); a refusal is shown next to the field
    or list it concerns and the page is shown again, the service having changed nothing.
    """

    roles = MANAGERS
    model: ClassVar[type[models.Model]]
    form_class: ClassVar[type[ScopedForm]]
    formsets: ClassVar[dict[str, Any]] = {}
    noun: ClassVar[str]

    def get_object(self) -> Any:
        if "pk" not in self.kwargs:
            return None
        manager: Any = self.model._default_manager
        return get_object_or_404(self.owned(manager.all()), pk=self.kwargs["pk"])

    def forms_for(self, obj: Any, data: Any = None) -> tuple[ScopedForm, dict[str, Any]]:
        # The forms work on their own copy: a rejected post must not show as the title.
        instance = type(obj)._default_manager.get(pk=obj.pk) if obj else self.model()
        form = self.form_class(
            data,
            instance=instance,
            user=self.request.user,
            organization=self.membership.organization,
        )
        formsets = {
            prefix: formset(data, instance=instance, prefix=prefix)
            for prefix, formset in self.formsets.items()
        }
        return form, formsets

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        obj = self.get_object()
        form, formsets = self.forms_for(obj)
        return self.page(obj, form, formsets)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        obj = self.get_object()
        form, formsets = self.forms_for(obj, request.POST)
        valid = [form.is_valid(), *(formset.is_valid() for formset in formsets.values())]
        if all(valid):
            saved = _saved_or_refused(
                lambda: self.save(obj, form, formsets), self.model, form, formsets
            )
            if saved is not None:
                verb = "added" if obj is None else "saved"
                messages.success(request, f"{self.noun.capitalize()} {saved} {verb}.")
                return redirect(self.done_url(saved))
        return self.page(obj, form, formsets)

    def page(self, obj: Any, form: ScopedForm, formsets: dict[str, Any]) -> HttpResponse:
        return self.render_to_response(
            self.get_context_data(
                obj=obj,
                form=form,
                formsets=formsets,
                noun=self.noun,
                cancel_url=self.done_url(obj) if obj else self.list_url(),
            )
        )

    def save(self, obj: Any, form: Any, formsets: dict[str, Any]) -> Any:
        raise NotImplementedError

    def done_url(self, obj: Any) -> str:
        raise NotImplementedError

    def list_url(self) -> str:
        raise NotImplementedError


def _saved_or_refused(
    call: Callable[[], Any],
    model: type[models.Model],
    form: ScopedForm,
    formsets: dict[str, Any],
) -> Any:
    """Run the service call; on a refusal put its words next to the field or list it names
    and return None (the service's transaction left everything as it was)."""
    try:
        with unique_violations_as_400(model):
            return call()
    except ApiInvalid as exc:
        detail = exc.detail if isinstance(exc.detail, dict) else {"detail": exc.detail}
        for field, problems in detail.items():
            _show(form, formsets, str(field), [str(p) for p in _as_list(problems)])
    except (DuplicateChild, InUse, LinkRefused) as exc:
        _show(form, formsets, exc.field, [str(exc)])
    except ConditionError as exc:
        _show(form, formsets, "condition_profile", [str(exc)])
    return None


def _as_list(problems: Any) -> Iterable[Any]:
    return problems if isinstance(problems, list | tuple) else [problems]


def _show(form: ScopedForm, formsets: dict[str, Any], field: str, problems: list[str]) -> None:
    if field in formsets:
        formsets[field].non_form_errors().extend(problems)
        return
    for problem in problems:
        form.add_error(field if field in form.fields else None, problem)


# --- Sites ------------------------------------------------------------------------------------


class SiteFormView(WorldFormView):
    model = Site
    form_class = SiteForm
    formsets: ClassVar[dict[str, Any]] = {"access_windows": AccessWindowFormSet}
    noun = "site"
    template_name = "frontend/planner/site_form.html"

    def save(self, obj: Site | None, form: Any, formsets: dict[str, Any]) -> Site:
        common: dict[str, Any] = {
            "actor": self.request.user,
            "fields": form.service_fields(),
            "access_windows": formsets["access_windows"].rows(),
            "presents": list(form.cleaned_data["presents"]),
        }
        if obj is None:
            return site_create(organization=self.membership.organization, **common)
        return site_update(site=obj, **common)

    def done_url(self, obj: Site) -> str:
        return reverse("planner:site", args=[obj.pk])

    def list_url(self) -> str:
        return reverse("planner:sites")


class SiteCreate(SiteFormView):
    pass


class SiteEdit(SiteFormView):
    scoped_model = Site


# --- Deployments ------------------------------------------------------------------------------


class DeploymentFormView(WorldFormView):
    model = Deployment
    form_class = DeploymentForm
    noun = "deployment"
    template_name = "frontend/planner/deployment_form.html"

    def save(self, obj: Deployment | None, form: Any, formsets: dict[str, Any]) -> Deployment:
        if obj is None:
            return deployment_create(
                organization=self.membership.organization,
                actor=self.request.user,
                fields=form.service_fields(),
                condition_profile=form.profile() or None,
            )
        return deployment_update(
            deployment=obj,
            actor=self.request.user,
            fields=form.service_fields(),
            condition_profile=form.profile(),
        )

    def done_url(self, obj: Deployment) -> str:
        return reverse("planner:deployment", args=[obj.pk])

    def list_url(self) -> str:
        return reverse("planner:deployments")


class DeploymentCreate(DeploymentFormView):
    pass


class DeploymentEdit(DeploymentFormView):
    scoped_model = Deployment


# --- Embodiments ------------------------------------------------------------------------------


class EmbodimentFormView(WorldFormView):
    model = Embodiment
    form_class = EmbodimentForm
    formsets: ClassVar[dict[str, Any]] = {
        "action_dimensions": ActionDimensionFormSet,
        "cameras": CameraFormSet,
    }
    noun = "embodiment"
    template_name = "frontend/planner/embodiment_form.html"

    def save(self, obj: Embodiment | None, form: Any, formsets: dict[str, Any]) -> Embodiment:
        common: dict[str, Any] = {
            "actor": self.request.user,
            "fields": form.service_fields(),
            "action_dimensions": formsets["action_dimensions"].rows(),
            "cameras": formsets["cameras"].rows(),
        }
        if obj is None:
            return embodiment_create(organization=self.membership.organization, **common)
        return embodiment_update(embodiment=obj, **common)

    def done_url(self, obj: Embodiment) -> str:
        return reverse("planner:embodiment", args=[obj.pk])

    def list_url(self) -> str:
        return reverse("planner:embodiments")


class EmbodimentCreate(EmbodimentFormView):
    pass


class EmbodimentEdit(EmbodimentFormView):
    scoped_model = Embodiment


# --- Taxonomies -------------------------------------------------------------------------------


class ConditionDimensionFormView(WorldFormView):
    model = ConditionDimension
    form_class = ConditionDimensionForm
    formsets: ClassVar[dict[str, Any]] = {"values": ConditionValueFormSet}
    noun = "condition dimension"
    template_name = "frontend/planner/dimension_form.html"

    def save(
        self, obj: ConditionDimension | None, form: Any, formsets: dict[str, Any]
    ) -> ConditionDimension:
        fields, values = form.service_fields(), formsets["values"].rows()
        actor = self.request.user
        if obj is None:
            return condition_dimension_create(
                organization=self.membership.organization, actor=actor, fields=fields, values=values
            )
        return condition_dimension_update(dimension=obj, actor=actor, fields=fields, values=values)

    def done_url(self, obj: Any) -> str:
        return reverse("planner:taxonomy")

    def list_url(self) -> str:
        return reverse("planner:taxonomy")


class ConditionDimensionCreate(ConditionDimensionFormView):
    pass


class ConditionDimensionEdit(ConditionDimensionFormView):
    scoped_model = ConditionDimension


class FailureModeFormView(WorldFormView):
    model = FailureMode
    form_class = FailureModeForm
    noun = "failure mode"
    template_name = "frontend/planner/failure_mode_form.html"

    def save(self, obj: FailureMode | None, form: Any, formsets: dict[str, Any]) -> FailureMode:
        if obj is None:
            return failure_mode_create(
                organization=self.membership.organization,
                actor=self.request.user,
                fields=form.service_fields(),
            )
        return failure_mode_update(
            failure_mode=obj, actor=self.request.user, fields=form.service_fields()
        )

    def done_url(self, obj: Any) -> str:
        return reverse("planner:taxonomy")

    def list_url(self) -> str:
        return reverse("planner:taxonomy")


class FailureModeCreate(FailureModeFormView):
    pass


class FailureModeEdit(FailureModeFormView):
    scoped_model = FailureMode
