"""Calibration coverage: did the episode move every action dimension across its range?

Positions are decoded from the joint/action streams (see :mod:`labeling.capture.decode`) and
folded into running minima and maxima, so memory does not grow with the recording.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import Check
from .decode import JointDecoder, joint_decoder_for
from .reader import CaptureMessage, Channel
from .spec import ActionDimension, CaptureSpec


@dataclass
class JointRange:
    low: float
    high: float
    samples: int = 1


@dataclass
class CalibrationTracker:
    """Running min/max per joint name over every decodable joint/action message."""

    ranges: dict[str, JointRange] = field(default_factory=dict)
    decoded: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    undecodable: dict[str, str] = field(default_factory=dict)
    _decoders: dict[Channel, JointDecoder | None] = field(default_factory=dict)

    def observe(self, message: CaptureMessage) -> None:
        """Fold one joint/action message into the ranges; malformed ones are counted, not raised."""
        channel = message.channel
        if channel in self._decoders:
            decode = self._decoders[channel]
        else:
            decode, reason = joint_decoder_for(channel)
            self._decoders[channel] = decode
            if reason is not None:
                self.undecodable[channel.topic] = reason
        if decode is None:
            return
        try:
            positions = decode(message.data)
        except Exception:  # generated CDR decoders raise assorted types on malformed data
            self.failed[channel.topic] = self.failed.get(channel.topic, 0) + 1
            return
        self.decoded[channel.topic] = self.decoded.get(channel.topic, 0) + 1
        for name, value in positions.items():
            seen = self.ranges.get(name)
            if seen is None:
                self.ranges[name] = JointRange(value, value)
            else:
                seen.samples += 1
                if value < seen.low:
                    seen.low = value
                elif value > seen.high:
                    seen.high = value

    def range_of(self, name: str) -> JointRange | None:
        """Return the observed range of ``name``, matching case-insensitively as a fallback."""
        if name in self.ranges:
            return self.ranges[name]
        folded = name.casefold()
        for key, value in self.ranges.items():
            if key.casefold() == folded:
                return value
        return None


def exercised_fraction(dimension: ActionDimension, seen: JointRange) -> float:
    """Return the share of the dimension's [min, max] covered by the observed range, in [0, 1]."""
    low = min(max(seen.low, dimension.min), dimension.max)
    high = min(max(seen.high, dimension.min), dimension.max)
    return min(1.0, max(0.0, (high - low) / dimension.span))


def calibration_check(spec: CaptureSpec, tracker: CalibrationTracker) -> Check:
    """Fail listing the action dimensions exercised below the spec's threshold or never seen."""
    threshold = spec.calibration_threshold
    evidence: dict[str, Any] = {
        "threshold": threshold,
        "decoded_messages": dict(tracker.decoded),
        "undecodable_messages": dict(tracker.failed),
        "undecodable_topics": dict(tracker.undecodable),
        "dimensions": {},
    }
    short: list[str] = []
    unseen: list[str] = []
    for dimension in spec.action_dimensions:
        seen = tracker.range_of(dimension.name)
        if seen is None:
            unseen.append(dimension.name)
            evidence["dimensions"][dimension.name] = {"seen": False}
            continue
        fraction = exercised_fraction(dimension, seen)
        evidence["dimensions"][dimension.name] = {
            "seen": True,
            "unit": dimension.unit,
            "range": [dimension.min, dimension.max],
            "observed": [seen.low, seen.high],
            "fraction": fraction,
            "samples": seen.samples,
            "outside_range": seen.low < dimension.min or seen.high > dimension.max,
        }
        if fraction < threshold:
            short.append(
                f"{dimension.name} exercised {fraction:.0%} of its range (needs {threshold:.0%})"
            )
    problems = list(short)
    if unseen:
        known = ", ".join(sorted(tracker.ranges)) or "none"
        problems.append(
            f"never seen in any joint/action message: {', '.join(unseen)} (joints seen: {known})"
        )
        if tracker.undecodable:
            reasons = "; ".join(f"{t}: {r}" for t, r in tracker.undecodable.items())
            problems.append(f"could not decode {reasons}")
    if not spec.action_dimensions:
        return Check("calibration_coverage", True, "no action dimensions in the spec", evidence)
    if problems:
        return Check("calibration_coverage", False, "; ".join(problems), evidence)
    return Check(
        "calibration_coverage",
        True,
        f"all {len(spec.action_dimensions)} action dimensions exercised ≥ {threshold:.0%} of their range",
        evidence,
    )
