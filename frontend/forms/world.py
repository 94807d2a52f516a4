"""Forms of the planner's world pages: sites, deployments, embodiments and the taxonomies.

They parse and check the shape of what a manager typed (required fields, numbers in range,
a row's own bounds in order); the writes and every rule across objects belong to the
``sites`` services the API uses too, whose refusals the views put next to the field.
Relation choices are scoped to the manager's organization, so another organization's id
is "not one of the available choices".
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.models import BaseInlineFormSet, inlineformset_factory

from accounts.models import Organization
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    Site,
    Task,
)

Row = dict[str, Any]


class ScopedForm(forms.ModelForm):
    """A model form whose relation choices come from the member's organization."""

    def __init__(self, *args: Any, user: Any, organization: Organization, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.organization = organization
        for field in self.fields.values():
            if isinstance(field.widget, forms.CheckboxInput | forms.CheckboxSelectMultiple):
                continue
            field.widget.attrs.setdefault("class", "wide")

    # (heading, field names) groups the page shows; None: every field in one group.
    fieldsets: tuple[tuple[str, tuple[str, ...]], ...] | None = None

    def service_fields(self) -> Row:
        """The cleaned model fields, as the services take them."""
        return {name: self.cleaned_data[name] for name in self._meta.fields or ()}

    def groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The visible fields by :attr:`fieldsets`, for the template."""
        if self.fieldsets is None:
            return [("", list(self.visible_fields()))]
        return [(title, [self[name] for name in names]) for title, names in self.fieldsets]


# --- Sites ------------------------------------------------------------------------------------


class SiteForm(ScopedForm):
    class Meta:
        model = Site
        fields = [
            "name",
            "slug",
            "kind",
            "customer",
            "address",
            "country",
            "region",
            "latitude",
            "longitude",
            "timezone",
            "capacity_episodes_per_day",
            "episode_minutes",
            "setup_hours",
            "cost_per_hour",
        ]
        help_texts = {"country": "Two letters, ISO 3166-1, e.g. NL."}

    fieldsets = (
        ("Site", ("name", "slug", "kind", "customer")),
        ("Location", ("address", "country", "region", "latitude", "longitude", "timezone")),
        (
            "Capacity and cost",
            (
                "capacity_episodes_per_day",
                "episode_minutes",
                "setup_hours",
                "cost_per_hour",
            ),
        ),
        ("Conditions", ("presents",)),
    )

    presents = forms.ModelMultipleChoiceField(
        queryset=ConditionValue.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Conditions it presents",
        help_text="The condition values this site shows naturally (its surveyed profile).",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["customer"].queryset = Organization.objects.filter(  # type: ignore[attr-defined]
            kind=Organization.Kind.CUSTOMER, operator=self.organization
        )
        self.fields["presents"].queryset = (  # type: ignore[attr-defined]
            ConditionValue.objects.visible_to(self.user)
            .select_related("dimension")
            .order_by("dimension__order", "dimension__name", "order", "label")
        )
        if self.instance.pk:
            self.initial["presents"] = list(self.instance.presents.values_list("pk", flat=True))

    def clean_episode_minutes(self) -> float:
        minutes = self.cleaned_data["episode_minutes"]
        if minutes is not None and minutes <= 0:
            raise forms.ValidationError("An episode takes some time: enter more than 0 minutes.")
        return float(minutes)

    def clean_setup_hours(self) -> float:
        return float(self.cleaned_data["setup_hours"])

    def clean_country(self) -> str:
        return str(self.cleaned_data["country"]).upper()


class AccessWindowForm(forms.ModelForm):
    class Meta:
        model = AccessWindow
        fields = ["weekday", "start_time", "end_time"]
        widgets = {
            "start_time": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "end_time": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("start_time"), data.get("end_time")
        if start is not None and end is not None and end <= start:
            self.add_error("end_time", f"Must be after the start ({start:%H:%M}).")
        return data


# --- Deployments ------------------------------------------------------------------------------


class DeploymentForm(ScopedForm):
    """A deployment and its surveyed condition profile: one share field per condition value
    (``share_<value id>``, blank for values not surveyed)."""

    class Meta:
        model = Deployment
        fields = [
            "name",
            "slug",
            "customer",
            "site",
            "embodiment",
            "task",
            "cycles_per_day",
            "reliability_target",
            "started_on",
            "active",
        ]
        widgets = {"started_on": forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")}

    fieldsets = (
        ("Deployment", ("name", "slug", "customer", "site", "embodiment", "task")),
        ("Production", ("cycles_per_day", "reliability_target", "started_on", "active")),
    )

    # Where the services' refusals of the whole profile (shares not summing to 1) go.
    condition_profile = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        user = self.user
        self.fields["customer"].queryset = Organization.objects.filter(  # type: ignore[attr-defined]
            kind=Organization.Kind.CUSTOMER, operator=self.organization
        )
        self.fields["site"].queryset = Site.objects.visible_to(user).select_related("customer")  # type: ignore[attr-defined]
        self.fields["embodiment"].queryset = Embodiment.objects.visible_to(user)  # type: ignore[attr-defined]
        self.fields["task"].queryset = Task.objects.visible_to(user)  # type: ignore[attr-defined]
        shares = (
            dict(self.instance.condition_profile.values_list("value_id", "share"))
            if self.instance.pk
            else {}
        )
        self.profile_values = list(
            ConditionValue.objects.visible_to(user)
            .select_related("dimension")
            .order_by("dimension__order", "dimension__name", "order", "label")
        )
        for value in self.profile_values:
            name = f"share_{value.pk}"
            self.fields[name] = forms.FloatField(
                required=False, min_value=0, max_value=1, label=value.label
            )
            self.fields[name].widget.attrs.update({"step": "any", "class": "narrow-input"})
            if value.pk in shares:
                self.initial[name] = shares[value.pk]

    def profile_rows(self) -> list[tuple[ConditionValue, forms.BoundField]]:
        return [(v, self[f"share_{v.pk}"]) for v in self.profile_values]

    def clean_reliability_target(self) -> float:
        target = self.cleaned_data["reliability_target"]
        if not 0 < target < 1:
            raise forms.ValidationError("Must be strictly between 0 and 1, e.g. 0.999.")
        return float(target)

    def profile(self) -> dict[int, float]:
        """The condition profile typed in: {value id: share} of the shares not left blank."""
        return {
            v.pk: self.cleaned_data[f"share_{v.pk}"]
            for v in self.profile_values
            if self.cleaned_data.get(f"share_{v.pk}") is not None
        }


# --- Embodiments ------------------------------------------------------------------------------


class EmbodimentForm(ScopedForm):
    class Meta:
        model = Embodiment
        fields = [
            "name",
            "slug",
            "morphology",
            "end_effector",
            "control_rate_hz",
            "calibration_threshold",
            "robot_type",
            "description",
            "state_topic",
            "action_topic",
            "action_source",
            "dataset_fps",
            "gap_policy",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        labels = {"control_rate_hz": "Control rate (Hz)", "dataset_fps": "Dataset FPS"}

    fieldsets = (
        ("Embodiment", ("name", "slug", "morphology", "end_effector", "robot_type", "description")),
        ("Control", ("control_rate_hz", "calibration_threshold")),
        (
            "Stream mapping",
            ("state_topic", "action_topic", "action_source", "dataset_fps", "gap_policy"),
        ),
    )


class ActionDimensionForm(forms.ModelForm):
    class Meta:
        model = ActionDimension
        fields = ["order", "name", "unit", "min_value", "max_value"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        low, high = data.get("min_value"), data.get("max_value")
        if low is not None and high is not None and high <= low:
            self.add_error("max_value", f"Must be above the minimum ({low:g}).")
        return data


class CameraForm(forms.ModelForm):
    class Meta:
        model = Camera
        fields = ["name", "mount", "width", "height", "fps", "topic", "clock_offset_ms"]
        labels = {"fps": "FPS", "clock_offset_ms": "Clock offset (ms)"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["width"].validators.append(_at_least_one)
        self.fields["height"].validators.append(_at_least_one)


def _at_least_one(value: int) -> None:
    if value is not None and value < 1:
        raise forms.ValidationError("Must be at least 1 pixel.")


# --- Taxonomies -------------------------------------------------------------------------------


class ConditionDimensionForm(ScopedForm):
    class Meta:
        model = ConditionDimension
        fields = ["name", "slug", "kind", "unit", "stageable", "order", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}


class ConditionValueForm(forms.ModelForm):
    class Meta:
        model = ConditionValue
        fields = ["slug", "label", "order", "low", "high", "stageable", "setup_instruction"]
        widgets = {"stageable": forms.NullBooleanSelect}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        low, high = data.get("low"), data.get("high")
        if low is not None and high is not None and high <= low:
            self.add_error("high", f"Must be above the bin's lower bound ({low:g}).")
        return data


class FailureModeForm(ScopedForm):
    class Meta:
        model = FailureMode
        fields = ["code", "name", "parent", "severity", "detectability", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"code": "Letters, digits, hyphens and underscores, e.g. grasp-slip."}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        parents = FailureMode.objects.visible_to(self.user).order_by("code")
        if self.instance.pk:
            parents = parents.exclude(pk=self.instance.pk)
        self.fields["parent"].queryset = parents  # type: ignore[attr-defined]


# --- Child lists ------------------------------------------------------------------------------


class ChildFormSet(BaseInlineFormSet):
    """Rows of a list that the services match by name (or key): blank extra rows and rows
    ticked for removal are left out of :meth:`rows`."""

    def rows(self) -> list[Row]:
        kept = []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE"):
                continue
            kept.append(
                {
                    name: data[name]
                    for name in form._meta.fields or ()
                    if name in data and name != self.fk.name
                }
            )
        return kept


def child_formset(parent: type, model: type, form: type, *, title: str, help: str) -> Any:
    formset: Any = inlineformset_factory(
        parent, model, form=form, formset=ChildFormSet, extra=1, can_delete=True
    )
    formset.title, formset.help = title, help
    return formset


AccessWindowFormSet = child_formset(
    Site,
    AccessWindow,
    AccessWindowForm,
    title="Access windows (local time)",
    help="When a team may work at the site each week. Rows are matched by day and start.",
)
ActionDimensionFormSet = child_formset(
    Embodiment,
    ActionDimension,
    ActionDimensionForm,
    title="Action dimensions",
    help="The action space, in order. Rows are matched by name.",
)
CameraFormSet = child_formset(
    Embodiment,
    Camera,
    CameraForm,
    title="Cameras",
    help="The camera rig and each camera's recorded image topic (blank: the image topic "
    "containing the camera's name). Rows are matched by name.",
)
ConditionValueFormSet = child_formset(
    ConditionDimension,
    ConditionValue,
    ConditionValueForm,
    title="Values",
    help="Rows are matched by slug. A value that episodes, labels, deployment profiles or "
    "sites use cannot be removed.",
)
