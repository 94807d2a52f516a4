"""What a recording of one embodiment must contain, and how strictly to judge it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class CaptureSpecError(ValueError):
    """The embodiment description cannot be turned into a capture spec."""


@dataclass(frozen=True)
class CameraSpec:
    name: str
    fps: float | None = None
    topic: str = ""  # the declared topic; blank: the image topic containing the name
    clock_offset_ms: float = 0.0  # from calibration: capture time = header stamp − offset


@dataclass(frozen=True)
class ActionDimension:
    name: str
    min: float
    max: float
    unit: str = ""

    @property
    def span(self) -> float:
        return self.max - self.min


@dataclass(frozen=True)
class CaptureSpec:
    """Expected streams of a recording plus the tolerances used to judge it."""

    slug: str
    control_rate_hz: float | None
    cameras: tuple[CameraSpec, ...]
    action_dimensions: tuple[ActionDimension, ...]
    calibration_threshold: float = 0.8
    rate_tolerance: float = 0.2
    max_skew_p95_ms: float = 50.0
    max_skew_worst_ms: float = 100.0
    stop_tolerance_s: float = 0.5
    stop_tolerance_fraction: float = 0.05

    @classmethod
    def from_embodiment(
        cls,
        embodiment: Mapping[str, Any],
        *,
        rate_tolerance: float = 0.2,
        max_skew_p95_ms: float = 50.0,
        max_skew_worst_ms: float = 100.0,
        stop_tolerance_s: float = 0.5,
        stop_tolerance_fraction: float = 0.05,
    ) -> CaptureSpec:
        """Build a spec from a plain embodiment dict (slug, control_rate_hz, cameras, ...).

        Raises CaptureSpecError naming the offending field when a value is missing or invalid.
        """
        slug = str(embodiment.get("slug", ""))
        rate = embodiment.get("control_rate_hz")
        control_rate = None if rate is None else _positive(rate, "control_rate_hz")
        threshold = _number(embodiment.get("calibration_threshold", 0.8), "calibration_threshold")
        if not 0.0 <= threshold <= 1.0:
            raise CaptureSpecError(f"calibration_threshold must be within [0, 1], got {threshold}")
        cameras = tuple(_camera(item, i) for i, item in enumerate(_list(embodiment, "cameras")))
        dimensions = tuple(
            _dimension(item, i) for i, item in enumerate(_list(embodiment, "action_dimensions"))
        )
        for field_name, value in (
            ("rate_tolerance", rate_tolerance),
            ("max_skew_p95_ms", max_skew_p95_ms),
            ("max_skew_worst_ms", max_skew_worst_ms),
            ("stop_tolerance_s", stop_tolerance_s),
            ("stop_tolerance_fraction", stop_tolerance_fraction),
        ):
            if _number(value, field_name) < 0:
                raise CaptureSpecError(f"{field_name} must not be negative, got {value}")
        return cls(
            slug=slug,
            control_rate_hz=control_rate,
            cameras=cameras,
            action_dimensions=dimensions,
            calibration_threshold=threshold,
            rate_tolerance=rate_tolerance,
            max_skew_p95_ms=max_skew_p95_ms,
            max_skew_worst_ms=max_skew_worst_ms,
            stop_tolerance_s=stop_tolerance_s,
            stop_tolerance_fraction=stop_tolerance_fraction,
        )

    def stop_tolerance_for(self, duration_s: float) -> float:
        """Return how far (s) a stream may start after / stop before the recording's ends.

        The larger of the absolute and the relative tolerance, so that neither short takes nor
        long ones raise false alarms.
        """
        return max(self.stop_tolerance_s, self.stop_tolerance_fraction * duration_s)


def _number(value: Any, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CaptureSpecError(f"{field_name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise CaptureSpecError(f"{field_name} must be finite, got {value!r}")
    return number


def _positive(value: Any, field_name: str) -> float:
    number = _number(value, field_name)
    if number <= 0:
        raise CaptureSpecError(f"{field_name} must be positive, got {value!r}")
    return number


def _list(embodiment: Mapping[str, Any], key: str) -> Sequence[Any]:
    value = embodiment.get(key) or []
    if not isinstance(value, list | tuple):
        raise CaptureSpecError(f"{key} must be a list, got {type(value).__name__}")
    return value


def _name(item: Mapping[str, Any], where: str) -> str:
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CaptureSpecError(f"{where} needs a non-empty name")
    return name.strip()


def _camera(item: Any, index: int) -> CameraSpec:
    if not isinstance(item, Mapping):
        raise CaptureSpecError(f"cameras[{index}] must be an object")
    name = _name(item, f"cameras[{index}]")
    fps = item.get("fps")
    return CameraSpec(
        name=name,
        fps=None if fps is None else _positive(fps, f"camera {name} fps"),
        topic=str(item.get("topic") or "").strip(),
        clock_offset_ms=_number(
            item.get("clock_offset_ms") or 0.0, f"camera {name} clock_offset_ms"
        ),
    )


def _dimension(item: Any, index: int) -> ActionDimension:
    if not isinstance(item, Mapping):
        raise CaptureSpecError(f"action_dimensions[{index}] must be an object")
    name = _name(item, f"action_dimensions[{index}]")
    low = _number(item.get("min"), f"action dimension {name} min")
    high = _number(item.get("max"), f"action dimension {name} max")
    if high <= low:
        raise CaptureSpecError(f"action dimension {name}: max ({high}) must exceed min ({low})")
    return ActionDimension(name=name, min=low, max=high, unit=str(item.get("unit", "")))
