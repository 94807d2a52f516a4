"""python manage.py validate_capture FILE [FILE ...] [--embodiment SLUG] [--calibration] [--json]"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Check MCAP recordings (one recording may span several files): per-topic counts, rates, "
        "jitter and gaps; with --embodiment, required streams, rates, synchronisation and early "
        "stops; with --calibration, the share of each action dimension's range exercised. "
        "Exit 0 when it passes, 1 with the failed checks and their evidence otherwise."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", help="MCAP files (or a folder) of one recording")
        parser.add_argument(
            "--embodiment", help="embodiment slug whose setup the recording must match"
        )
        parser.add_argument(
            "--organization", help="operator organization slug (if embodiment slugs clash)"
        )
        parser.add_argument(
            "--calibration", action="store_true", help="check a calibration episode"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        from labeling.capture import CaptureReadError, validate_recording
        from labeling.capture.spec import CaptureSpecError
        from labeling.selectors import capture_spec_for

        spec = None
        if options.get("embodiment"):
            from sites.models import Embodiment

            embodiments = Embodiment.objects.filter(slug=options["embodiment"])
            if options.get("organization"):
                embodiments = embodiments.filter(organization__slug=options["organization"])
            if embodiments.count() != 1:
                found = embodiments.count()
                raise CommandError(
                    f"embodiment {options['embodiment']!r}: "
                    + ("not found" if not found else f"{found} match; give --organization")
                )
            spec = capture_spec_for(embodiment=embodiments.get())
        elif options["calibration"]:
            raise CommandError(
                "--calibration needs --embodiment: the check compares against its action dimensions"
            )
        paths = [Path(f) for f in options["files"]]
        try:
            report = validate_recording(paths, spec, calibration=options["calibration"])
        except (CaptureReadError, CaptureSpecError) as exc:
            if options["json"]:
                self.stdout.write(json.dumps({"passed": False, "error": str(exc)}))
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=1))
        else:
            self.stdout.write(report.to_text())
        if not report.passed:
            raise CommandError(
                "recording failed: " + "; ".join(c.name for c in report.failed_checks), returncode=1
            )
