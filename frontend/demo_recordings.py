"""The demo's robot recordings: captures of the played round get an MCAP recording each.

Recordings are synthetic (:mod:`labeling.capture.synthetic`) at the embodiment's own camera
rig and control rate, so they validate and convert like a robot's: the images show their own
capture time and the joints follow known functions, which makes what the export wrote
checkable by eye (the clock code in the video) and by the tests.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from labeling.capture.synthetic import T0_NS, CameraPlan, RecordingPlan, write_recording
from labeling.models import Dataset, Episode
from labeling.recording_services import recording_store_file, recording_validate
from sites.models import Embodiment

TAKE_S = 3.0


def attach_demo_recordings(*, dataset: Dataset, count: int, take_s: float = TAKE_S) -> int:
    """Make sure ``count`` captured episodes of ``dataset`` have a recording (a ``take_s``
    take each, validated), attaching one to the first episodes without; returns how many were
    attached now. Idempotent."""
    have = Episode.objects.filter(dataset=dataset, recordings__isnull=False).distinct().count()
    if have >= count:
        return 0
    episodes = list(
        Episode.objects.filter(dataset=dataset, recordings__isnull=True, embodiment__isnull=False)
        .select_related("embodiment")
        .order_by("id")[: count - have]
    )
    if not episodes:
        return 0
    embodiments: dict[int, Embodiment] = {}
    attached = 0
    with tempfile.TemporaryDirectory(prefix="fieldcraft-demo-") as scratch:
        for i, episode in enumerate(episodes):
            assert episode.embodiment_id is not None
            embodiment = embodiments.get(episode.embodiment_id)
            if embodiment is None:
                embodiment = Embodiment.objects.prefetch_related(
                    "cameras", "action_dimensions"
                ).get(pk=episode.embodiment_id)
                embodiments[episode.embodiment_id] = embodiment
            cameras = list(embodiment.cameras.all())
            joints = tuple(a.name for a in embodiment.action_dimensions.all())
            plan = RecordingPlan(
                duration_s=take_s,
                t0_ns=T0_NS + i * 60 * 1_000_000_000,
                cameras=[
                    CameraPlan(
                        name=c.name,
                        topic=c.topic or None,
                        width=c.width,
                        height=c.height,
                        fps=c.fps,
                        clock_offset_ms=c.clock_offset_ms,
                        quality=85,
                    )
                    for c in cameras
                ],
                joints=joints,
                state_hz=embodiment.control_rate_hz,
                action_hz=embodiment.control_rate_hz,
                action_topic=None
                if embodiment.action_source == "next_state"
                else "/joint_commands",
                seed=episode.pk,
            )
            path = Path(scratch) / f"{episode.key}.mcap"
            write_recording(path, plan)
            recording, created = recording_store_file(
                organization=dataset.organization,
                path=path,
                episode=episode,
                embodiment=embodiment,
            )
            path.unlink()
            if created:
                recording_validate(recording=recording)
            fps = max((c.fps for c in cameras), default=embodiment.control_rate_hz)
            Episode.objects.filter(pk=episode.pk).update(
                frames=round(take_s * fps), duration_s=take_s
            )
            attached += 1
    return attached
