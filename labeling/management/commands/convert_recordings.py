"""python manage.py convert_recordings OUTDIR RECORDING [RECORDING ...] --embodiment SLUG --task TEXT

Each RECORDING (an MCAP file, or a folder of split MCAP files) is one episode. Writes a
LeRobot dataset (v3.0 by default) with data files and video, and prints per episode its frames,
per-stream match rate and skew. Exit 1 with the problems when a recording is refused (the
others are still written) or nothing could be converted (nothing is written).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

FORMATS = {"lerobot-v3": "v3.0", "lerobot-v2.1": "v2.1"}


def _offset(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep or not name.strip():
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise CommandError(
            f"--clock-offset {text!r}: expected CAMERA=MILLISECONDS, e.g. wrist=12.5"
        ) from None


class Command(BaseCommand):
    help = (
        "Convert ROS 2 MCAP recordings (one episode each: a file or a folder of split files) "
        "into a LeRobot dataset with data files and video, aligned on the dataset clock by the "
        "embodiment's stream mapping. Prints per episode the frames, each stream's match rate "
        "and skew; exit 1 with the problems on bad input."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("outdir", help="folder for the dataset (must not exist yet)")
        parser.add_argument("recordings", nargs="+", help="MCAP files or folders, one per episode")
        parser.add_argument("--embodiment", required=True, help="embodiment slug")
        parser.add_argument("--organization", help="operator organization slug (if slugs clash)")
        parser.add_argument("--task", required=True, help="task string of every episode")
        parser.add_argument("--fps", type=float, help="dataset fps (default: fastest camera)")
        parser.add_argument("--format", choices=sorted(FORMATS), default="lerobot-v3")
        parser.add_argument("--codec", choices=["libsvtav1", "libx264"], default="libsvtav1")
        parser.add_argument(
            "--clock-offset",
            action="append",
            default=[],
            metavar="CAMERA=MS",
            help="a camera's clock offset in ms (capture time = header stamp − offset); repeatable",
        )
        parser.add_argument(
            "--gap-policy",
            choices=["split", "mark", "exclude"],
            help="override the embodiment's gap policy",
        )
        parser.add_argument("--workers", type=int, default=2, help="recordings converted at once")

    def handle(self, *args: Any, **options: Any) -> None:
        from labeling.capture.streams import StreamMappingError
        from labeling.exports.frames import FrameEpisode, Source, write_frames_dataset
        from labeling.exports.lerobot import DatasetWriteError
        from labeling.selectors import stream_map_for
        from sites.models import Embodiment

        embodiments = Embodiment.objects.filter(slug=options["embodiment"]).prefetch_related(
            "cameras", "action_dimensions"
        )
        if options.get("organization"):
            embodiments = embodiments.filter(organization__slug=options["organization"])
        found = list(embodiments[:2])
        if len(found) != 1:
            raise CommandError(
                f"embodiment {options['embodiment']!r}: "
                + ("not found" if not found else "several match; give --organization")
            )
        embodiment = found[0]
        outdir = Path(options["outdir"])
        if outdir.exists() and any(outdir.iterdir()):
            raise CommandError(f"{outdir} exists and is not empty; give a new folder")
        if options["fps"] is not None and not options["fps"] > 0:
            raise CommandError(f"--fps must be positive, got {options['fps']}")
        recordings = [Path(r) for r in options["recordings"]]
        missing = [str(r) for r in recordings if not r.exists()]
        if missing:
            raise CommandError(f"no such recording: {', '.join(missing)}")
        try:
            stream_map = stream_map_for(embodiment=embodiment).with_options(
                fps=options["fps"],
                clock_offsets_ms=dict(_offset(o) for o in options["clock_offset"]),
                gap_policy=options["gap_policy"],
            )
        except StreamMappingError as exc:
            raise CommandError(f"embodiment {embodiment.slug}: {exc}") from None
        fps = stream_map.fps or max((c.fps or 0.0 for c in stream_map.cameras), default=0.0)
        if not fps:
            fps = embodiment.control_rate_hz
        stream_map = stream_map.with_options(fps=fps)
        episodes = [
            FrameEpisode(
                key=str(path),
                task=options["task"],
                extra={},
                recording=Source(
                    paths=[path],
                    sha256=f"{uuid.uuid4().hex}{uuid.uuid4().hex}",  # a one-off conversion
                ),
            )
            for path in recordings
        ]
        partial = outdir.with_name(f".{outdir.name}.partial-{uuid.uuid4().hex[:8]}")
        scratch = Path(tempfile.mkdtemp(prefix="fieldcraft-convert-"))
        try:
            try:
                summary = write_frames_dataset(
                    root=partial,
                    version=FORMATS[options["format"]],
                    fps=fps,
                    robot_type=embodiment.robot_type or embodiment.slug,
                    stream_map=stream_map,
                    codec=options["codec"],
                    media_root=scratch,
                    episodes=episodes,
                    total=len(episodes),
                    extra_columns={},
                    info_extra={
                        "fieldcraft": {
                            "embodiment": embodiment.slug,
                            "action": stream_map.action_source,
                            "gap_policy": stream_map.gap_policy,
                            "clock_offsets_ms": {
                                c.name: c.clock_offset_ms for c in stream_map.cameras
                            },
                        }
                    },
                    workers=max(1, options["workers"]),
                    progress=None,
                )
            except DatasetWriteError as exc:
                self._print_left_out(partial)
                raise CommandError(f"nothing was written: {exc}") from None
            self._print_episodes(episodes, scratch, stream_map, options["codec"])
            if outdir.exists():
                outdir.rmdir()
            partial.replace(outdir)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
            shutil.rmtree(scratch, ignore_errors=True)
        convention = (
            "action = the recorded action stream"
            if stream_map.action_source == "stream"
            else "action = next state (no action stream; said in info.json)"
        )
        self.stdout.write(
            f"Wrote {summary.episodes:,} episodes ({summary.frames:,} frames at {fps:g} fps, "
            f"{options['format']}, {options['codec']}) to {outdir}; {convention}."
        )
        refused = sum(summary.left_out.values())
        if refused:
            for item in summary.left_out_named:
                self.stderr.write(f"  left out {item['key']}: {item['reason']}")
            raise CommandError(
                f"{refused:,} of {len(episodes):,} recordings were left out (listed above and in "
                f"{outdir / 'meta' / 'fieldcraft' / 'left_out.jsonl'})"
            )

    def _print_left_out(self, root: Path) -> None:
        import json

        path = root / "meta" / "fieldcraft" / "left_out.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                item = json.loads(line)
                self.stderr.write(f"  {item['key']}: {item['reason']}")

    def _print_episodes(
        self, episodes: list[Any], scratch: Path, stream_map: Any, codec: str
    ) -> None:
        import json

        from labeling.exports.conversions import conversion_folder, stored_conversion

        for episode in episodes:
            folder = conversion_folder(scratch, episode.recording.sha256, stream_map, codec)
            conversion = stored_conversion(folder)
            if conversion is None or not conversion.bundles:
                continue
            for bundle in conversion.bundles:
                meta = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
                sync = meta["sync"]
                streams = "; ".join(
                    f"{s['name']} {s['match_rate']:.1%} matched, skew p95 "
                    f"{s['skew_p95_ms']:.1f} ms, worst {s['skew_worst_ms']:.1f} ms"
                    for s in sync["streams"]
                )
                part = f" [{bundle.name}]" if len(conversion.bundles) > 1 else ""
                self.stdout.write(
                    f"{episode.key}{part}: {meta['length']:,} frames ({sync['verdict']}); {streams}"
                )
