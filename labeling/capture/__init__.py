"""Capture validation of MCAP recordings, free of Django.

Tells a field team, before they leave the site, whether a recording is complete and
synchronised and whether a calibration episode exercised every action dimension::

    spec = CaptureSpec.from_embodiment(embodiment_dict)
    report = validate_recording([Path("episode_0.mcap")], spec, calibration=True)
    print(report.to_text())
"""

from .calibration import CalibrationTracker, calibration_check
from .checks import Check
from .reader import CaptureMessage, CaptureReadError, Channel, FileInfo, Recording, read_messages
from .report import CaptureReport, FileReport, TopicReport
from .spec import ActionDimension, CameraSpec, CaptureSpec, CaptureSpecError
from .validate import validate_recording

__all__ = [
    "ActionDimension",
    "CalibrationTracker",
    "CameraSpec",
    "CaptureMessage",
    "CaptureReadError",
    "CaptureReport",
    "CaptureSpec",
    "CaptureSpecError",
    "Channel",
    "Check",
    "FileInfo",
    "FileReport",
    "Recording",
    "TopicReport",
    "calibration_check",
    "read_messages",
    "validate_recording",
]
