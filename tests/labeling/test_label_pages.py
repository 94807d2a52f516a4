"""The labelling pages: queue, keyboard labelling page, job page, review, media, exports."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Role
from labeling.labels.services import annotation_submit, label_job_create, label_next
from labeling.models import Episode, LabelAssignment, LabelJob
from sites.models import ConditionValue
from tests.factories import captured_dataset, member


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def job(media, world_a):
    dataset, _ = captured_dataset(world_a, 3, intended="dim")
    return label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=0,
        gold_share=0,
        dimensions=["lighting"],
    )


def value(world, slug):
    return ConditionValue.objects.get(dimension__organization=world.operator, slug=slug)


def test_an_annotator_labels_a_round_from_the_queue_to_the_end(job, world_a, client_for):
    client = client_for(world_a.annotator)
    queue = client.get("/label/")
    assert "Label queue" in queue.content.decode()
    assert job.dataset.name in queue.content.decode()

    response = client.post(f"/label/jobs/{job.pk}/next/")
    for _ in range(3):
        assert response.status_code == 302
        assert re.match(r"^/label/assignments/\d+/$", response.url)
        page = client.get(response.url)
        assert page.status_code == 200
        response = client.post(
            response.url,
            {
                f"dim-{value(world_a, 'bright').dimension_id}": value(world_a, "bright").pk,
                "outcome": "success",
                "seconds": "3.5",
            },
        )

    assert response.url == "/label/"
    assert Episode.objects.filter(dataset=job.dataset, label_status="accepted").count() == 3
    for ep in Episode.objects.filter(dataset=job.dataset).select_related("condition_set"):
        assert value(world_a, "bright").pk in ep.condition_set.value_ids
        assert value(world_a, "dim").pk not in ep.condition_set.value_ids
    done = client.get("/label/", follow=True).content.decode()
    assert "Nothing left for you" in done or job.dataset.name in done


def test_the_labelling_page_prefills_the_intent_and_carries_no_inline_script(
    job, world_a, client_for
):
    assignment = label_next(annotator=world_a.annotator, job=job)

    body = (
        client_for(world_a.annotator).get(f"/label/assignments/{assignment.pk}/").content.decode()
    )

    dim = value(world_a, "dim")
    assert re.search(rf'name="dim-{dim.dimension_id}" value="{dim.pk}" checked', body)
    assert re.search(r'name="outcome" value="success" checked', body)
    assert "data-label-form" in body and "frontend/label/label.js" in body
    assert not re.search(
        r"<script(?![^>]*\bsrc=)[^>]*>", body.replace('type="application/json"', "")
    )
    assert not re.search(r"\son[a-z]+=", body)  # no inline event handlers
    assert "Synchronised (no validation report kept)" in body


def test_the_labelling_page_shows_the_capture_validation_result(job, world_a, client_for):
    from labeling.models import Recording

    assignment = label_next(annotator=world_a.annotator, job=job)
    Episode.objects.filter(pk=assignment.episode_id).update(
        sync_status="desynced",
        extra={"capture": {"passed": False, "failed_checks": ["synchronisation"]}},
    )
    Recording.objects.create(
        organization=world_a.operator,
        sha256="a" * 64,
        size=10,
        original_name="ep.mcap",
        storage_path="/nowhere/ep.mcap",
        episode_id=assignment.episode_id,
        status="failed",
        report={
            "passed": False,
            "duration_s": 12.5,
            "checks": [
                {"name": "synchronisation", "passed": False, "message": "wrist camera lags 80 ms"},
                {"name": "rates", "passed": True, "message": "all topics at rate"},
            ],
        },
    )

    body = (
        client_for(world_a.annotator).get(f"/label/assignments/{assignment.pk}/").content.decode()
    )

    assert "Capture validation failed" in body
    assert "Failed: synchronisation" in body
    assert "wrist camera lags 80 ms" in body
    assert "Out of sync" in body
    assert "Recording ep.mcap, 12.5 s" in body


def test_the_labelling_page_is_flat_in_queries(job, world_a, client_for):
    client = client_for(world_a.annotator)
    assignment = label_next(annotator=world_a.annotator, job=job)
    url = f"/label/assignments/{assignment.pk}/"
    client.get(url)
    with CaptureQueriesContext(connection) as small:
        client.get(url)
    assert client.get(url).status_code == 200
    captured_dataset(world_a, 30, slug="more")  # more episodes, values, conditions elsewhere

    with CaptureQueriesContext(connection) as large:
        client.get(url)

    # Its speed is measured in bench/, not asserted here (a loaded machine is no clock).
    assert len(large) <= len(small) <= 20


def test_invalid_answers_are_shown_back_with_the_problem(job, world_a, client_for):
    assignment = label_next(annotator=world_a.annotator, job=job)

    response = client_for(world_a.annotator).post(
        f"/label/assignments/{assignment.pk}/",
        {"outcome": "success", "failure_mode": world_a.failure_mode.pk},
    )

    assert response.status_code == 400
    assert "only when the outcome is failure" in response.content.decode()
    assert LabelAssignment.objects.get(pk=assignment.pk).status == "assigned"


def test_skip_hands_the_next_episode(job, world_a, client_for):
    client = client_for(world_a.annotator)
    first = label_next(annotator=world_a.annotator, job=job)

    response = client.post(f"/label/assignments/{first.pk}/skip/")

    assert response.status_code == 302
    second = LabelAssignment.objects.get(annotator=world_a.annotator, status="assigned")
    assert response.url == f"/label/assignments/{second.pk}/"
    assert second.episode_id != first.episode_id


def test_another_annotator_cannot_open_my_assignment_but_a_manager_can_read_it(
    job, world_a, client_for
):
    colleague = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    assignment = label_next(annotator=world_a.annotator, job=job)

    assert client_for(colleague).get(f"/label/assignments/{assignment.pk}/").status_code == 404
    assert (
        client_for(colleague).post(f"/label/assignments/{assignment.pk}/skip/").status_code == 404
    )
    read = client_for(world_a.manager).get(f"/label/assignments/{assignment.pk}/")
    assert read.status_code == 200
    assert "data-readonly" in read.content.decode()


def test_media_is_served_by_the_app_and_only_inside_media_root(media, world_a, client_for):
    (media / "clips").mkdir(parents=True)
    (media / "clips" / "a.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    episode = Episode.objects.get(pk=world_a.episode.pk)
    episode.extra = {"media": ["clips/a.mp4", "../../etc/passwd", "clips/missing.png"]}
    episode.save()
    client = client_for(world_a.annotator)

    video = client.get(f"/label/episodes/{episode.pk}/media/")
    assert video.status_code == 200
    assert video["Content-Type"] == "video/mp4"
    assert client.get(f"/label/episodes/{episode.pk}/media/?n=1").status_code == 404


def test_another_organizations_annotator_sees_nothing(job, world_a, world_b, client_for):
    assignment = label_next(annotator=world_a.annotator, job=job)
    outsider = client_for(world_b.annotator)

    queue = outsider.get("/label/").content.decode()
    assert job.dataset.name not in queue and "qzalpha" not in queue.lower()
    assert outsider.post(f"/label/jobs/{job.pk}/next/").status_code == 404
    assert outsider.get(f"/label/assignments/{assignment.pk}/").status_code == 404
    assert (
        outsider.post(f"/label/assignments/{assignment.pk}/", {"outcome": "success"}).status_code
        == 404
    )
    assert outsider.get(f"/label/episodes/{assignment.episode_id}/media/").status_code == 404
    assert not LabelAssignment.objects.filter(annotator=world_b.annotator, job=job).exists()
    mine = {
        "/api/label-jobs/": {job.pk, world_a.label_job.pk},
        "/api/assignments/": {assignment.pk, world_a.label_assignment.pk},
        "/api/annotations/": {world_a.annotation.pk},
        "/api/reviews/": {world_a.review.pk},
    }
    for url in ("/api/gold-labels/", "/api/exports/"):  # managers' only, whoever asks
        assert outsider.get(url).status_code == 403, url
    for url, ids in mine.items():
        seen = {row["id"] for row in outsider.get(url).json()["results"]}
        assert not seen & ids, url
        assert "qzalpha" not in outsider.get(url).content.decode().lower(), url
    assert outsider.get(f"/api/label-jobs/{job.pk}/").status_code == 404
    assert outsider.post(f"/api/label-jobs/{job.pk}/next/").status_code == 404


def _disagree(job, world_a):
    colleague = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    LabelJob.objects.filter(pk=job.pk).update(overlap_share=1)
    from labeling.models import LabelItem

    LabelItem.objects.filter(job=job).update(required=2)
    for user, slug in ((world_a.annotator, "bright"), (colleague, "dim")):
        a = label_next(annotator=user, job=job)
        annotation_submit(
            assignment=a,
            actor=user,
            value_ids=[value(world_a, slug).pk],
            outcome="success",
            notes=f"{slug} to me",
        )
    return Episode.objects.get(pk=a.episode_id)


def test_the_reviewer_resolves_a_disagreement_on_the_review_page(job, world_a, client_for):
    episode = _disagree(job, world_a)
    client = client_for(world_a.manager)

    page = client.get(f"/label/jobs/{job.pk}/review/").content.decode()
    assert "bright to me" in page and "dim to me" in page
    assert 'class="differs"' in page
    lighting = value(world_a, "bright").dimension_id
    response = client.post(
        f"/label/episodes/{episode.pk}/resolve/",
        {
            f"dim-{lighting}": value(world_a, "bright").pk,
            "outcome": "success",
            "decision": "accept",
        },
    )

    assert response.status_code == 302
    episode.refresh_from_db()
    assert episode.label_status == "accepted"
    assert value(world_a, "bright").pk in episode.condition_set.value_ids
    assert "Nothing to review" in client.get(f"/label/jobs/{job.pk}/review/").content.decode()


def test_a_rejection_without_a_reason_is_refused_on_the_review_page(job, world_a, client_for):
    episode = _disagree(job, world_a)
    client = client_for(world_a.manager)

    client.post(f"/label/episodes/{episode.pk}/resolve/", {"decision": "reject"})
    assert Episode.objects.get(pk=episode.pk).label_status == "labelled"
    client.post(
        f"/label/episodes/{episode.pk}/resolve/", {"decision": "reject", "reason": "blurred"}
    )
    assert Episode.objects.get(pk=episode.pk).label_status == "rejected"


def test_the_job_page_shows_throughput_agreement_and_exclusions_in_flat_queries(
    job, world_a, client_for
):
    client = client_for(world_a.manager)
    url = f"/label/jobs/{job.pk}/"
    client.get(url)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200
    _disagree(job, world_a)
    a = label_next(annotator=world_a.annotator, job=job)
    if a:
        annotation_submit(assignment=a, actor=world_a.annotator, value_ids=[], outcome="failure")

    with CaptureQueriesContext(connection) as large:
        response = client.get(url)

    body = response.content.decode()
    assert len(large) <= len(small)
    assert "Throughput" in body and "Agreement" in body and "Cohen" in body
    assert "awaiting review" in body
    assert "Review queue (1)" in body


def test_list_pages_stay_flat_as_jobs_grow(media, world_a, client_for):
    client = client_for(world_a.manager)
    for url in ("/label/",):
        client.get(url)
        with CaptureQueriesContext(connection) as small:
            client.get(url)
        for i in range(4):
            dataset, _ = captured_dataset(world_a, 2, slug=f"grow-{i}")
            label_job_create(dataset=dataset, actor=world_a.manager)
        with CaptureQueriesContext(connection) as large:
            client.get(url)
        assert len(large) <= len(small), url


def test_managers_create_a_job_and_export_from_the_pages(
    media, world_a, client_for, django_capture_on_commit_callbacks
):
    dataset, _ = captured_dataset(world_a, 2, label_status="accepted")
    client = client_for(world_a.manager)

    created = client.post(f"/label/datasets/{dataset.pk}/job/")
    job = LabelJob.objects.get(dataset=dataset)
    assert created.url == f"/label/jobs/{job.pk}/"
    exports = client.get(f"/label/datasets/{dataset.pk}/exports/").content.decode()
    assert "<strong>2 rows</strong>" in exports
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"/label/datasets/{dataset.pk}/exports/", {"format": "lerobot-v3"})
    detail = client.get(started.url).content.decode()
    assert "Download the zip" in detail


def test_annotators_cannot_open_manager_pages(job, world_a, client_for):
    client = client_for(world_a.annotator)

    assert client.get(f"/label/jobs/{job.pk}/").status_code == 403
    assert client.get(f"/label/jobs/{job.pk}/review/").status_code == 403
    assert client.get(f"/label/datasets/{job.dataset_id}/exports/").status_code == 403


def test_the_rounds_page_links_to_its_label_job_and_export(media, world_a, client_for):
    from labeling.models import Dataset

    round = world_a.round
    if round.dataset is None:
        round.dataset = Dataset.objects.create(
            organization=world_a.operator, slug="r1", name="Round 1", source="captured"
        )
        round.save()
    client = client_for(world_a.manager)
    url = f"/planner/rounds/{round.pk}/"

    before = client.get(url).content.decode()
    assert f"/label/datasets/{round.dataset.pk}/exports/" in before
    job = label_job_create(dataset=round.dataset, actor=world_a.manager)
    after = client.get(url).content.decode()
    assert f"/label/jobs/{job.pk}/" in after
