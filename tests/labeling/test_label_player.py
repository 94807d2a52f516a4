"""The player's routes: an episode's converted videos served with byte ranges (a <video> seeks
with them), and the playback JSON (status, cameras, traces, capture report) the page polls; both
as the media route allows (annotators by assignment, managers all, another organization 404)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accounts.models import Job, Role
from labeling.labels.services import label_job_create, label_next
from labeling.models import Episode, LabelAssignment, Recording
from labeling.playback import CONVERT_TASK, episode_playback
from tests.factories import captured_dataset, member
from tests.labeling.player_support import FRONT, JOINTS, WRIST, record_episode


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def assignment(media, world_a) -> LabelAssignment:
    """The annotator's assignment of a captured episode (not yet recorded)."""
    dataset, _ = captured_dataset(world_a, 2, slug="played")
    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=0, gold_share=0)
    found = label_next(annotator=world_a.annotator, job=job)
    assert found is not None
    return found


@pytest.fixture
def played(assignment) -> Episode:
    """The assignment's episode, recorded with two cameras and converted."""
    record_episode(assignment.episode, cameras=("front", "wrist"))
    return assignment.episode


def video_url(episode: Episode, key: str = FRONT) -> str:
    return f"/label/episodes/{episode.pk}/video/{key}.mp4"


def playback_url(episode: Episode) -> str:
    return f"/label/episodes/{episode.pk}/playback/"


def video_bytes(episode: Episode, key: str = FRONT) -> bytes:
    camera = next(c for c in episode_playback(episode).cameras if c.key == key)
    return Path(camera.path).read_bytes()


def body(response) -> bytes:
    assert response.streaming  # never read whole into memory
    return b"".join(response.streaming_content)


# --- byte ranges ----------------------------------------------------------------------------------


def test_without_a_range_the_whole_video_is_sent(played, world_a, client_for):
    data = video_bytes(played)

    response = client_for(world_a.annotator).get(video_url(played))

    assert response.status_code == 200
    assert response["Content-Type"] == "video/mp4"
    assert response["Accept-Ranges"] == "bytes"
    assert response["Content-Length"] == str(len(data))
    assert body(response) == data


@pytest.mark.parametrize(
    ("header", "first", "last"),
    [
        ("bytes=10-99", 10, 99),
        ("bytes=0-0", 0, 0),
        ("bytes=100-", 100, None),
        ("bytes=-500", -500, None),
        ("bytes=5-99999999", 5, None),  # past the end: up to the end
        ("bytes=-99999999", 0, None),  # more than there is: all of it
    ],
)
def test_a_range_is_a_206_with_exactly_its_bytes(played, world_a, client_for, header, first, last):
    data = video_bytes(played)
    size = len(data)
    start = first % size if first < 0 else first
    end = size - 1 if last is None else last

    response = client_for(world_a.annotator).get(video_url(played), HTTP_RANGE=header)

    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes {start}-{end}/{size}"
    assert response["Content-Length"] == str(end - start + 1)
    assert response["Content-Type"] == "video/mp4"
    assert response["Accept-Ranges"] == "bytes"
    assert body(response) == data[start : end + 1]


@pytest.mark.parametrize("header", ["bytes={size}-", "bytes={size}-{size}", "bytes=-0"])
def test_a_range_beyond_the_video_is_a_416(played, world_a, client_for, header):
    size = len(video_bytes(played))

    response = client_for(world_a.annotator).get(
        video_url(played), HTTP_RANGE=header.format(size=size)
    )

    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{size}"


@pytest.mark.parametrize("header", ["bytes=9-2", "items=0-10", "bytes=0-1,5-6", "bytes=x-y"])
def test_a_range_this_server_does_not_serve_gets_the_whole_video(
    played, world_a, client_for, header
):
    response = client_for(world_a.annotator).get(video_url(played), HTTP_RANGE=header)

    assert response.status_code == 200
    assert body(response) == video_bytes(played)


def test_a_range_for_another_version_of_the_video_gets_the_whole_video(played, world_a, client_for):
    client = client_for(world_a.annotator)
    etag = client.get(video_url(played), HTTP_RANGE="bytes=0-9")["ETag"]

    same = client.get(video_url(played), HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE=etag)
    other = client.get(video_url(played), HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"stale"')

    assert same.status_code == 206
    assert other.status_code == 200


def test_each_camera_has_its_own_video_and_an_unknown_one_is_404(played, world_a, client_for):
    client = client_for(world_a.annotator)

    wrist = client.get(video_url(played, WRIST))

    assert wrist.status_code == 200
    assert body(wrist) == video_bytes(played, WRIST)
    assert client.get(video_url(played, "observation.images.nose")).status_code == 404


# --- access ----------------------------------------------------------------------------------------


def test_an_annotator_without_an_assignment_for_the_episode_gets_404(played, world_a, client_for):
    colleague = client_for(member(world_a.operator, Role.ANNOTATOR, "annotator-player-qzalpha"))

    assert colleague.get(video_url(played)).status_code == 404
    assert colleague.get(playback_url(played)).status_code == 404


def test_the_manager_plays_any_episode_of_the_organization(played, world_a, client_for):
    manager = client_for(world_a.manager)

    assert manager.get(video_url(played), HTTP_RANGE="bytes=0-1").status_code == 206
    assert manager.get(playback_url(played)).json()["status"] == "ready"


def test_another_organization_gets_404(played, world_b, client_for):
    for user in (world_b.manager, world_b.annotator):
        client = client_for(user)
        assert client.get(video_url(played)).status_code == 404
        assert client.get(playback_url(played)).status_code == 404


def test_a_customer_viewer_is_refused(played, world_a, client_for):
    viewer = client_for(world_a.viewer)

    assert viewer.get(video_url(played)).status_code == 403
    assert viewer.get(playback_url(played)).status_code == 403


# --- the playback JSON, in each status --------------------------------------------------------------


def test_a_converted_recording_plays_with_cameras_traces_and_its_capture_report(
    played, world_a, client_for
):
    data = client_for(world_a.annotator).get(playback_url(played)).json()

    assert data["status"] == "ready"
    assert data["fps"] == 30.0
    assert data["length"] == 30
    assert [c["key"] for c in data["cameras"]] == [FRONT, WRIST]
    assert [c["name"] for c in data["cameras"]] == ["front", "wrist"]
    assert all((c["width"], c["height"]) == (96, 64) for c in data["cameras"])
    assert re.match(
        rf"^/label/episodes/{played.pk}/video/{FRONT}\.mp4\?v=\w+$", data["cameras"][0]["url"]
    )
    assert data["joints"] == list(JOINTS)
    traces = data["traces"]
    assert traces["t"][:3] == pytest.approx([0, 1 / 30, 2 / 30], abs=1e-4)
    assert len(traces["t"]) == 30
    assert [len(s) for s in traces["observation.state"]] == [30, 30]
    assert [len(s) for s in traces["action"]] == [30, 30]
    streams = {s["name"]: s for s in data["report"]["streams"]}
    assert set(streams) == {"state", "action", "front", "wrist"}
    assert streams["front"]["match_rate"] == 1.0 and streams["front"]["stale"] == 0
    assert {"skew_p95_ms", "skew_worst_ms"} <= set(streams["wrist"])
    assert data["report"]["verdict"] == "synced"


def test_an_episode_without_a_recording_says_so(assignment, world_a, client_for):
    data = client_for(world_a.annotator).get(playback_url(assignment.episode)).json()

    assert data["status"] == "none"
    assert data["message"] == "No recording is attached to this episode."
    assert data["cameras"] == [] and data["traces"] == {}


def test_a_recording_being_validated_is_converting_and_asks_for_nothing_yet(
    assignment, world_a, client_for
):
    record_episode(assignment.episode, convert=False)

    data = client_for(world_a.annotator).get(playback_url(assignment.episode)).json()

    assert data["status"] == "converting"
    assert not Job.objects.filter(task_name=CONVERT_TASK).exists()


def test_a_validated_recording_without_its_conversion_asks_for_it_once_then_plays(
    assignment, world_a, client_for, django_capture_on_commit_callbacks
):
    recording = record_episode(assignment.episode, convert=False)
    Recording.objects.filter(pk=recording.pk).update(status=Recording.Status.PASSED)
    client = client_for(world_a.annotator)

    with django_capture_on_commit_callbacks(execute=False) as queued:
        first = client.get(playback_url(assignment.episode)).json()
        again = client.get(playback_url(assignment.episode)).json()
    assert first["status"] == again["status"] == "converting"
    jobs = Job.objects.filter(task_name=CONVERT_TASK, task_kwargs__recording_id=recording.pk)
    assert jobs.count() == 1  # the page polls: one conversion, not one per poll
    for run in queued:  # the worker (eager here) converts it
        run()

    done = client.get(playback_url(assignment.episode)).json()

    assert jobs.get().status == Job.Status.SUCCEEDED
    assert done["status"] == "ready"
    assert [c["key"] for c in done["cameras"]] == [FRONT]


def test_a_failed_conversion_is_shown_with_its_reason(assignment, world_a, client_for):
    recording = record_episode(assignment.episode, convert=False)
    Recording.objects.filter(pk=recording.pk).update(status=Recording.Status.PASSED)
    Job.objects.create(
        organization=world_a.operator,
        kind="conversion",
        task_name=CONVERT_TASK,
        task_kwargs={"recording_id": recording.pk},
        status=Job.Status.FAILED,
        message="the disk is full",
    )

    data = client_for(world_a.annotator).get(playback_url(assignment.episode)).json()

    assert data["status"] == "failed"
    assert "the disk is full" in data["message"]


def test_a_recording_that_cannot_be_converted_is_failed_with_the_converters_reason(
    assignment, world_a, client_for
):
    recording = record_episode(assignment.episode, convert=False)
    path = Path(recording.storage_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])  # cut mid-write
    from labeling.playback import episode_convert

    episode_convert(episode=assignment.episode)

    data = client_for(world_a.annotator).get(playback_url(assignment.episode)).json()

    assert data["status"] == "failed"
    assert data["message"].startswith("The recording cannot be played:")


def test_a_robot_whose_streams_cannot_be_mapped_is_failed_not_converting_forever(
    assignment, world_a, client_for
):
    recording = record_episode(assignment.episode, convert=False)
    Recording.objects.filter(pk=recording.pk).update(status=Recording.Status.PASSED)
    world_a.embodiment.action_dimensions.all().delete()

    data = client_for(world_a.annotator).get(playback_url(assignment.episode)).json()

    assert data["status"] == "failed"
    assert "no action dimensions" in data["message"]
    assert not Job.objects.filter(task_name=CONVERT_TASK).exists()


# --- the pages ---------------------------------------------------------------------------------------


def test_the_labelling_page_carries_the_player_and_no_inline_script(
    played, assignment, world_a, client_for
):
    page = client_for(world_a.annotator).get(f"/label/assignments/{assignment.pk}/")

    html = page.content.decode()
    assert page.status_code == 200
    assert f'data-playback-url="/label/episodes/{played.pk}/playback/"' in html
    assert 'data-status="ready"' in html
    assert "frontend/label/player.js" in html and "vendor/plotly/plotly.min.js" in html
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    assert "No media stored" not in html


def test_the_labelling_page_says_plainly_there_is_no_recording(assignment, world_a, client_for):
    html = (
        client_for(world_a.annotator).get(f"/label/assignments/{assignment.pk}/").content.decode()
    )

    assert "No recording is attached to this episode." in html
    assert "No media stored for this episode" in html
    assert "plotly" not in html


def test_the_review_page_has_a_player_for_each_episode_in_dispute(played, world_a, client_for):
    from labeling.labels.services import annotation_submit
    from labeling.models import LabelItem

    assignment = LabelAssignment.objects.get(episode=played)
    LabelItem.objects.filter(pk=assignment.item_id).update(required=1)
    annotation_submit(
        assignment=assignment,
        actor=world_a.annotator,
        value_ids=[],
        outcome="success",
        flagged=True,
    )

    html = (
        client_for(world_a.manager).get(f"/label/jobs/{assignment.job_id}/review/").content.decode()
    )

    assert f'data-playback-url="/label/episodes/{played.pk}/playback/"' in html
    assert "frontend/label/player.js" in html
