"""A long recording holding five takes becomes five episodes with the right segments: the
tablet's clock offset is estimated from where the robot moves, a take outside the recording
stays listed for the manager, and each segment converts to frames of its own take."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from campaigns.models import TaskRecording
from campaigns.takes import recording_takes_match, task_unmatched_takes
from labeling.capture.synthetic import T0_NS, CameraPlan, RecordingPlan, read_clock, write_recording
from labeling.capture.video import decode_video
from labeling.models import Episode, RecordingSegment
from labeling.playback import episode_convert
from labeling.recording_services import recording_store_file, recording_validate

TAKES_S = [(1.0, 3.0), (5.0, 7.5), (9.0, 11.0), (13.0, 15.0), (16.5, 19.0)]
TABLET_AHEAD_S = 2.37  # the tablet's clock runs this far ahead of the robot's


def _still(takes: list[tuple[float, float]], duration: float) -> tuple[tuple[float, float], ...]:
    edges = [0.0] + [x for span in takes for x in span] + [duration]
    return tuple((edges[i], edges[i + 1]) for i in range(0, len(edges), 2))


def _tablet(t_s: float) -> str:
    moment = datetime.fromtimestamp(T0_NS / 1e9, tz=UTC) + timedelta(seconds=t_s + TABLET_AHEAD_S)
    return moment.isoformat()


@pytest.fixture
def session(world_a, tmp_path):
    world_a.embodiment.cameras.update(width=96, height=64)
    task = world_a.collection_task
    takes = [*TAKES_S, (40.0, 42.0)]  # the last one is not in this recording
    episodes = [
        Episode.objects.create(
            organization=world_a.operator,
            dataset=task.round.dataset,
            key=f"take-{i}",
            embodiment=world_a.embodiment,
            site=task.site,
            outcome="success",
            provenance="captured",
            recorded_at=datetime.fromisoformat(_tablet(b)),
            extra={
                "collection_task": task.pk,
                "take": {"started_at": _tablet(a), "ended_at": _tablet(b)},
            },
        )
        for i, (a, b) in enumerate(takes)
    ]
    duration = 20.0
    path = tmp_path / "session.mcap"
    write_recording(
        path,
        RecordingPlan(
            duration_s=duration,
            joints=("j1", "gripper"),
            cameras=[CameraPlan("front", width=96, height=64, fps=30)],
            state_hz=50,
            action_hz=50,
            still=_still(TAKES_S, duration),
        ),
    )
    recording, _ = recording_store_file(
        organization=world_a.operator, path=path, embodiment=world_a.embodiment
    )
    TaskRecording.objects.create(task=task, recording=recording)
    return task, recording, episodes


def test_five_takes_become_five_episodes_with_their_segments(session):
    task, recording, episodes = session

    result = recording_takes_match(task=task, recording=recording)

    assert result.method == "motion"
    assert result.offset_ms == pytest.approx(TABLET_AHEAD_S * 1000, abs=25)
    assert [m["key"] for m in result.matched] == [f"take-{i}" for i in range(5)]
    assert [u["key"] for u in result.unmatched] == ["take-5"]
    for (a, b), episode in zip(TAKES_S, episodes, strict=False):
        segment = RecordingSegment.objects.get(episode=episode)
        assert (segment.start_ns - T0_NS) / 1e9 == pytest.approx(a, abs=0.03)
        assert (segment.end_ns - T0_NS) / 1e9 == pytest.approx(b, abs=0.03)
    assert [e.key for e in task_unmatched_takes(task=task)] == ["take-5"]
    stored = TaskRecording.objects.get(task=task, recording=recording).takes
    assert len(stored["matched"]) == 5
    # Matching again cuts nothing twice.
    again = recording_takes_match(task=task, recording=recording)
    assert again.matched == []
    assert RecordingSegment.objects.count() == 5


def test_each_take_validates_and_converts_to_its_own_frames(session):
    task, recording, episodes = session
    recording_takes_match(task=task, recording=recording)

    recording_validate(recording=recording)

    for (a, b), episode in zip(TAKES_S[:2], episodes, strict=False):
        episode.refresh_from_db()
        assert episode.sync_status == "synced"
        conversion = episode_convert(episode=episode)
        assert conversion is not None and conversion.ok
        (bundle,) = conversion.bundles
        meta = json.loads((bundle / "bundle.json").read_text())
        assert meta["length"] == pytest.approx((b - a) * 30, abs=2)
        shown = [
            read_clock(image) / 1e6
            for _, image in decode_video(Path(bundle) / "videos" / "observation.images.front.mp4")
        ]
        assert min(shown) >= a - 0.05
        assert max(shown) <= b + 0.05


def test_the_manager_can_give_the_offset_by_hand(session):
    task, recording, episodes = session

    result = recording_takes_match(task=task, recording=recording, offset_ms=TABLET_AHEAD_S * 1000)

    assert result.method == "given"
    assert len(result.matched) == 5
    segment = RecordingSegment.objects.get(episode=episodes[2])
    assert (segment.start_ns - T0_NS) / 1e9 == pytest.approx(9.0, abs=0.001)


def test_the_manager_sees_takes_without_a_recording_and_matches_them_again(
    session, client_for, world_a
):
    from campaigns.models import FieldRecord

    task, recording, episodes = session
    for episode in episodes:  # the takes came from the tablet's capture records
        FieldRecord.objects.create(
            uuid=__import__("uuid").uuid4(),
            organization=world_a.operator,
            task=task,
            kind="capture",
            payload={"outcome": "success", "calibration": False},
            episode=episode,
            author=world_a.field,
            client_created_at=episode.recorded_at,
            task_version_seen=task.version,
        )
    manager = client_for(world_a.manager)
    url = f"/planner/rounds/{task.round_id}/progress/"

    page = manager.get(url).content.decode()
    assert "Takes without a recording" in page
    assert page.count("<code>take-") == 6

    response = manager.post(
        f"/planner/tasks/{task.pk}/takes/",
        {"recording": recording.pk, "offset_ms": TABLET_AHEAD_S * 1000},
    )
    assert response.status_code == 302
    page = manager.get(url).content.decode()
    assert page.count("<code>take-") == 1  # the take outside the recording stays listed
    assert RecordingSegment.objects.count() == 5
    refused = manager.post(f"/planner/tasks/{task.pk}/takes/", {"recording": recording.pk})
    assert refused.status_code == 302
    assert RecordingSegment.objects.count() == 5
    field = client_for(world_a.field)
    assert field.post(
        f"/planner/tasks/{task.pk}/takes/", {"recording": recording.pk, "offset_ms": 0}
    ).status_code in (302, 403)
    assert RecordingSegment.objects.count() == 5
