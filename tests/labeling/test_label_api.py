"""The labelling API: jobs and the queue, answers, reviews, gold labels; scoping and flat lists."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Role
from labeling.labels.services import label_job_create
from labeling.models import Episode, LabelJob
from sites.models import ConditionValue
from tests.factories import captured_dataset, member


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def value(world, slug):
    return ConditionValue.objects.get(dimension__organization=world.operator, slug=slug)


def post(client, url, data=None):
    return client.post(url, data or {}, content_type="application/json")


def claim_and_answer(client, world, job, slug, *, flagged=False):
    """Claim the next episode of ``job`` through the API and label it ``slug``; its id."""
    claimed = post(client, f"/api/label-jobs/{job.pk}/next/").json()
    answered = post(
        client,
        "/api/annotations/",
        {
            "assignment": claimed["id"],
            "condition_values": [value(world, slug).pk],
            "outcome": "success",
            "flagged": flagged,
        },
    )
    assert answered.status_code == 201, answered.json()
    return claimed["episode"]


def test_a_manager_creates_a_job_and_annotators_label_through_the_api(media, world_a, client_for):
    dataset, _ = captured_dataset(world_a, 2)
    manager = client_for(world_a.manager)
    annotator = client_for(world_a.annotator)

    created = post(
        manager,
        "/api/label-jobs/",
        {"dataset": dataset.pk, "overlap_share": 0, "gold_share": 0, "dimensions": ["lighting"]},
    )
    assert created.status_code == 201, created.json()
    job_id = created.json()["id"]
    assert created.json()["items"] == 2
    assert post(annotator, "/api/label-jobs/", {"dataset": dataset.pk}).status_code == 403

    for _ in range(2):
        claimed = post(annotator, f"/api/label-jobs/{job_id}/next/")
        assert claimed.status_code == 200
        body = claimed.json()
        assert body["status"] == "assigned"
        answered = post(
            annotator,
            "/api/annotations/",
            {
                "assignment": body["id"],
                "condition_values": [value(world_a, "bright").pk],
                "outcome": "success",
                "seconds_spent": 2.5,
            },
        )
        assert answered.status_code == 201, answered.json()
        # An annotator is not told an episode's label status (it would give gold away).
        assert answered.json()["label_status"] is None

    assert post(annotator, f"/api/label-jobs/{job_id}/next/").status_code == 204
    detail = manager.get(f"/api/label-jobs/{job_id}/").json()
    assert detail["accepted"] == 2
    assert detail["stats"]["annotators"][0]["done"] == 2
    assert detail["stats"]["export"]["rows"] == 2


def test_an_answer_that_does_not_fit_is_a_400(media, world_a, client_for):
    dataset, _ = captured_dataset(world_a, 1)
    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=0, gold_share=0)
    annotator = client_for(world_a.annotator)
    assignment = post(annotator, f"/api/label-jobs/{job.pk}/next/").json()

    response = post(
        annotator,
        "/api/annotations/",
        {"assignment": assignment["id"], "condition_values": [999999], "outcome": "success"},
    )

    assert response.status_code == 400
    assert "not one this job labels" in response.json()["detail"]


def test_a_disagreement_is_listed_for_review_and_resolved_through_the_api(
    media, world_a, client_for
):
    dataset, _ = captured_dataset(world_a, 1)
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=1,
        gold_share=0,
        dimensions=["lighting"],
    )
    colleague = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    for user, slug in ((world_a.annotator, "bright"), (colleague, "dim")):
        claim_and_answer(client_for(user), world_a, job, slug)
    manager = client_for(world_a.manager)

    queue = manager.get(f"/api/label-jobs/{job.pk}/review-queue/")
    (case,) = queue.json()
    assert case["disagreements"] == ["condition:lighting"]
    resolved = post(
        manager,
        "/api/reviews/",
        {
            "episode": case["episode"],
            "decision": "accept",
            "condition_values": [value(world_a, "dim").pk],
            "outcome": "success",
        },
    )

    assert resolved.status_code == 201, resolved.json()
    assert Episode.objects.get(pk=case["episode"]).label_status == "accepted"
    assert manager.get(f"/api/label-jobs/{job.pk}/review-queue/").json() == []
    assert (
        post(
            client_for(world_a.annotator),
            "/api/reviews/",
            {"episode": case["episode"], "decision": "reject", "reason": "x"},
        ).status_code
        == 403
    )


def test_annotators_see_reviews_of_their_own_work_but_never_of_a_gold_episode(
    media, world_a, client_for
):
    dataset, _ = captured_dataset(world_a, 3)
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=0,
        gold_share=0,
        dimensions=["lighting"],
    )
    colleague = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    mine, gold = (
        claim_and_answer(client_for(world_a.annotator), world_a, job, "bright", flagged=True)
        for _ in range(2)
    )
    theirs = claim_and_answer(client_for(colleague), world_a, job, "bright", flagged=True)
    manager = client_for(world_a.manager)
    for episode, make_gold in ((mine, False), (gold, True), (theirs, False)):
        review = post(
            manager,
            "/api/reviews/",
            {
                "episode": episode,
                "decision": "accept",
                "condition_values": [value(world_a, "dim").pk],
                "outcome": "failure",
                "make_gold": make_gold,
            },
        )
        assert review.status_code == 201, review.json()

    seen = client_for(world_a.annotator).get(f"/api/reviews/?job={job.pk}").json()
    rows = seen["results"] if isinstance(seen, dict) else seen
    assert [r["episode"] for r in rows] == [mine]  # not a colleague's, not the gold one
    everything = manager.get(f"/api/reviews/?job={job.pk}").json()
    assert len(everything["results"] if isinstance(everything, dict) else everything) == 3
    assert client_for(world_a.field).get("/api/reviews/").status_code == 403


def test_gold_labels_are_for_managers_only(media, world_a, client_for):
    dataset, episodes = captured_dataset(world_a, 1)
    label_job_create(dataset=dataset, actor=world_a.manager)
    manager = client_for(world_a.manager)

    created = post(
        manager,
        "/api/gold-labels/",
        {
            "episode": episodes[0].pk,
            "condition_values": [value(world_a, "bright").pk],
            "outcome": "success",
        },
    )

    assert created.status_code == 201, created.json()
    assert created.json()["id"] in {
        g["id"] for g in manager.get("/api/gold-labels/").json()["results"]
    }
    assert client_for(world_a.annotator).get("/api/gold-labels/").status_code == 403
    assert (
        client_for(world_a.annotator).get(f"/api/gold-labels/{created.json()['id']}/").status_code
        == 403
    )


def test_annotators_see_only_their_own_assignments_and_answers(media, world_a, client_for):
    colleague = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")

    mine = client_for(world_a.annotator).get("/api/assignments/").json()["results"]
    theirs = client_for(colleague).get("/api/assignments/").json()["results"]

    assert [a["id"] for a in mine] == [world_a.label_assignment.pk]
    assert theirs == []
    assert (
        client_for(colleague).get(f"/api/annotations/{world_a.annotation.pk}/").status_code == 404
    )
    assert (
        client_for(world_a.manager).get(f"/api/annotations/{world_a.annotation.pk}/").status_code
        == 200
    )


def test_job_settings_change_through_patch(media, world_a, client_for):
    manager = client_for(world_a.manager)
    url = f"/api/label-jobs/{world_a.label_job.pk}/"

    response = manager.patch(
        url, {"status": "closed", "overlap_share": 0.5}, content_type="application/json"
    )

    assert response.status_code == 200, response.json()
    job = LabelJob.objects.get(pk=world_a.label_job.pk)
    assert (job.status, job.overlap_share) == ("closed", 0.5)
    assert post(client_for(world_a.annotator), f"{url}next/").status_code == 409


@pytest.mark.parametrize(
    "url",
    [
        "/api/label-jobs/",
        "/api/assignments/",
        "/api/annotations/",
        "/api/reviews/",
        "/api/gold-labels/",
        "/api/exports/",
    ],
)
def test_label_lists_stay_flat_as_rows_grow(media, world_a, client_for, url):
    from labeling.labels.services import annotation_submit, label_next, review_resolve

    client = client_for(world_a.manager)
    client.get(url)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200
    people = [member(world_a.operator, Role.ANNOTATOR, f"grower-{i}-qzalpha") for i in range(3)]
    for i in range(3):
        dataset, episodes = captured_dataset(world_a, 2, slug=f"grow-{i}", label_status="accepted")
        job = label_job_create(
            dataset=dataset, actor=world_a.manager, overlap_share=0, gold_share=0
        )
        Episode.objects.filter(dataset=dataset).update(label_status="unlabelled")
        for person in people[:2]:
            a = label_next(annotator=person, job=job)
            annotation_submit(
                assignment=a, actor=person, value_ids=[], outcome="success", flagged=True
            )
        review_resolve(episode=episodes[0], reviewer=world_a.manager, decision="reject", reason="x")
        from labeling.labels.services import gold_label_set

        gold_label_set(episode=episodes[1], actor=world_a.manager, value_ids=[], outcome="success")
        from accounts.models import Job
        from labeling.models import DatasetExport

        DatasetExport.objects.create(
            organization=world_a.operator,
            dataset=dataset,
            format="csv",
            job=Job.objects.create(organization=world_a.operator, kind="export", status="queued"),
        )

    with CaptureQueriesContext(connection) as large:
        assert client.get(url).status_code == 200

    assert len(large) <= len(small), f"{url}: {len(small)} queries grew to {len(large)}"
