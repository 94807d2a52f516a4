"""Capture validation inside the app: specs from embodiments, stored uploads, results on episodes."""

from __future__ import annotations

from typing import Any

from labeling.capture.spec import CaptureSpec
from sites.models import Embodiment


def capture_spec_for(*, embodiment: Embodiment, **tolerances: Any) -> CaptureSpec:
    """Return the capture spec an embodiment's recordings must meet (cameras, joints, rates)."""
    return CaptureSpec.from_embodiment(
        {
            "slug": embodiment.slug,
            "control_rate_hz": embodiment.control_rate_hz,
            "calibration_threshold": embodiment.calibration_threshold,
            "cameras": [{"name": c.name, "fps": c.fps} for c in embodiment.cameras.all()],
            "action_dimensions": [
                {"name": a.name, "unit": a.unit, "min": a.min_value, "max": a.max_value}
                for a in embodiment.action_dimensions.all()
            ],
        },
        **tolerances,
    )
