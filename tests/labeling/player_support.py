"""Episodes with a real recording, converted for the player: synthetic MCAP (every frame shows
its capture time), stored as an upload is, converted as the background job does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from labeling.capture.synthetic import T0_NS, CameraPlan, RecordingPlan, write_recording
from labeling.models import Episode, Recording
from labeling.playback import episode_convert
from labeling.recording_services import recording_store_file
from sites.models import Camera

JOINTS = ("j1", "gripper")
FRONT = "observation.images.front"
WRIST = "observation.images.wrist"


def small_cameras(embodiment: Any, names: tuple[str, ...] = ("front",)) -> None:
    """The embodiment films with ``names`` at 96x64, 30 fps (the world's front camera is
    640x480: shrunk so encoding is quick)."""
    embodiment.cameras.update(width=96, height=64)
    for name in names:
        Camera.objects.get_or_create(
            embodiment=embodiment,
            name=name,
            defaults={"mount": name, "width": 96, "height": 64, "fps": 30},
        )


def record_episode(
    episode: Episode,
    *,
    cameras: tuple[str, ...] = ("front",),
    seconds: float = 1.0,
    seed: int = 0,
    convert: bool = True,
) -> Recording:
    """Record ``episode`` with ``cameras`` (96x64, 30 fps; joints at 100 Hz), store the file
    linked to it and, with ``convert``, convert it for playback now."""
    assert episode.embodiment is not None
    small_cameras(episode.embodiment, cameras)
    folder = Path(settings.MEDIA_ROOT) / "synthetic"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{episode.key}-{seed}.mcap"
    write_recording(
        path,
        RecordingPlan(
            duration_s=seconds,
            t0_ns=T0_NS + seed * 10**12,
            joints=JOINTS,
            cameras=[CameraPlan(name, width=96, height=64) for name in cameras],
            state_hz=100,
            action_hz=100,
            seed=seed,
        ),
    )
    recording, _ = recording_store_file(
        organization=episode.organization,
        path=path,
        episode=episode,
        embodiment=episode.embodiment,
    )
    if convert:
        episode_convert(episode=episode)
    return recording
