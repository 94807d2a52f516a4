"""The loop walked end to end on the demo through the product's own doors: plan and publish a
round, capture takes on the field API with a session recording uploaded in chunks, the takes
cut from it, validated and converted; label them on the annotator's pages; export the round
with frames; import the next policy's evaluation; the round's impact counts the episodes."""

from __future__ import annotations

import hashlib
import io
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from campaigns.field.services import task_seen_token
from labeling.capture.synthetic import T0_NS, CameraPlan, RecordingPlan, write_recording
from labeling.models import DatasetExport, Episode, RecordingSegment

TAKES_S = [(1.0, 3.0), (4.5, 6.5), (8.0, 10.0)]
TABLET_AHEAD_S = 0.8


def _tablet(t_s: float) -> datetime:
    return datetime.fromtimestamp(T0_NS / 1e9, tz=UTC) + timedelta(seconds=t_s + TABLET_AHEAD_S)


@pytest.mark.slow
def test_plan_capture_label_export_evaluate_and_the_impact_counts_the_round(
    db, settings, tmp_path, client_for, django_capture_on_commit_callbacks
):
    from django.contrib.auth import get_user_model

    from analytics.models import GapReport
    from analytics.services.gap import gap_report_build
    from analytics.services.planning import round_plan_from_gap
    from analytics.services.steering import round_impact_compute
    from campaigns.models import Campaign, CollectionTask
    from campaigns.services.plan_edit import round_publish
    from frontend.demo import demo_round
    from labeling.labels.services import label_job_create

    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DATA_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    users = get_user_model().objects
    manager, field = (
        client_for(users.get(username="manager")),
        client_for(users.get(username="field")),
    )

    # Plan and publish round 1.
    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    round = campaign.rounds.get(number=1)
    report = gap_report_build(
        report=GapReport.objects.create(organization=campaign.organization, campaign=campaign)
    )
    with django_capture_on_commit_callbacks(execute=True):
        round = round_plan_from_gap(
            round=round, report=report, start=timezone.localdate() + timedelta(days=1), days=14
        )
        round = round_publish(round=round)
    task = (
        CollectionTask.objects.filter(
            round=round, team__members__username="field", embodiment__slug="mm7"
        )
        .prefetch_related("task_targets")
        .order_by("scheduled_date", "id")
        .first()
    )
    assert task is not None
    task.embodiment.cameras.update(width=160, height=120)  # small frames: a quick test
    target = task.task_targets.first().target

    # Capture three takes on the field API ("Start take", then +1 success).
    records = [
        {
            "uuid": str(uuid.uuid4()),
            "kind": "capture",
            "task": task.pk,
            "payload": {
                "target": target.pk,
                "outcome": "success",
                "calibration": False,
                "take_started_at": _tablet(a).isoformat(),
            },
            "client_created_at": _tablet(b).isoformat(),
            "task_version_seen": task.version,
            "task_seen": task_seen_token(task_id=task.pk, team_id=task.team_id),
        }
        for a, b in TAKES_S
    ]
    sent = field.post("/api/field/records/", records, content_type="application/json")
    assert sent.status_code in (200, 201), sent.content
    episodes = list(Episode.objects.filter(field_record__task=task).order_by("recorded_at"))
    assert len(episodes) == 3

    # The robot's session recording, uploaded in chunks by the field team.
    path = tmp_path / "session.mcap"
    joints = tuple(a.name for a in task.embodiment.action_dimensions.all())
    edges = [0.0] + [x for span in TAKES_S for x in span] + [11.5]
    write_recording(
        path,
        RecordingPlan(
            duration_s=11.5,
            joints=joints,
            cameras=[
                CameraPlan(c.name, width=160, height=120, fps=c.fps)
                for c in task.embodiment.cameras.all()
            ],
            state_hz=task.embodiment.control_rate_hz,
            action_hz=task.embodiment.control_rate_hz,
            still=tuple((edges[i], edges[i + 1]) for i in range(0, len(edges), 2)),
        ),
    )
    content = path.read_bytes()
    with django_capture_on_commit_callbacks(execute=True):
        started = field.post(
            f"/api/collection-tasks/{task.pk}/recordings/",
            {
                "filename": "session.mcap",
                "size": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
                "kind": "episode",
            },
            content_type="application/json",
        )
    assert started.status_code == 201, started.content
    upload = started.json()["id"]
    chunk = len(content) // 3 + 1
    for offset in range(0, len(content), chunk):
        body = content[offset : offset + chunk]
        with django_capture_on_commit_callbacks(execute=True):
            response = field.put(
                f"/api/recording-uploads/{upload}/",
                body,
                content_type="application/octet-stream",
                HTTP_CONTENT_RANGE=f"bytes {offset}-{offset + len(body) - 1}/{len(content)}",
            )
        assert response.status_code in (200, 201), response.content
    assert RecordingSegment.objects.filter(episode__in=episodes).count() == 3
    for episode in episodes:
        episode.refresh_from_db()
        assert episode.sync_status == "synced", episode.extra
        assert episode.validated

    # Label them on the annotator's pages.
    job = label_job_create(
        dataset=round.dataset, actor=users.get(username="manager"), overlap_share=0, gold_share=0
    )
    annotator = client_for(users.get(username="annotator"))
    response = annotator.post(f"/label/jobs/{job.pk}/next/")
    labelled = 0
    while response.status_code == 302 and response.url.startswith("/label/assignments/"):
        page = annotator.get(response.url).content.decode()
        form: dict[str, str] = {"outcome": "success"}
        for name in sorted(set(re.findall(r'name="(dim-\d+)"', page))):
            checked = re.search(rf'name="{name}" value="([^"]+)" checked', page)
            first = re.search(rf'name="{name}" value="([^"]+)"', page)
            form[name] = checked.group(1) if checked else first.group(1)
        response = annotator.post(response.url, form)
        labelled += 1
    assert labelled == 3
    assert set(
        Episode.objects.filter(pk__in=[e.pk for e in episodes]).values_list(
            "label_status", flat=True
        )
    ) == {"accepted"}

    # Export the round with frames and video.
    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post(
            "/api/exports/",
            {"dataset": round.dataset_id, "format": "lerobot-v3"},
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    export = DatasetExport.objects.get(pk=response.json()["id"])
    assert export.job.status == "succeeded", export.job.message
    assert export.summary["conversion"]["source_episodes"] == 3
    progress = manager.get(f"/planner/rounds/{round.pk}/progress/").content.decode()
    row = re.search(rf'<tr data-task="{task.pk}">(.*?)</tr>', progress, re.S)
    assert row is not None
    for cell in ("recorded", "validated", "labelled", "exported"):
        assert re.search(rf'class="num {cell}">3<', row.group(1)), cell

    # The next policy, trained on the round, is evaluated; the impact counts the episodes.
    demo_round(write_dir=tmp_path / "eval", import_results=True, recordings=0)
    impact = round_impact_compute(round=round)
    assert impact.summary["episodes_added"] > 0
    page = manager.get(f"/planner/rounds/{round.pk}/impact/").content.decode()
    assert "episodes added" in page.lower()
