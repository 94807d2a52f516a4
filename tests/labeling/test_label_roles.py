"""What each role may see and do in labelling and failure records: the probe's role leaks.

Each test is one finding of the outside probe (issue 15), replayed through the URL.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client

from accounts.models import AuditEvent, Role
from labeling.labels.services import annotation_submit, label_job_create, label_next
from labeling.models import Episode, Review
from sites.models import FailureRecord
from tests.factories import captured_dataset, member


@pytest.mark.parametrize("role", ["annotator", "field"])
def test_only_managers_download_exports(role, world_a, client_for):
    url = f"/api/exports/{world_a.dataset_export.pk}/download/"

    refused = client_for(getattr(world_a, role)).get(url)
    served = client_for(world_a.manager).get(url)

    assert refused.status_code == 403
    assert served.status_code == 200


def test_annotators_cannot_read_the_review_queue_of_other_annotators_answers(world_a, client_for):
    url = f"/api/label-jobs/{world_a.label_job.pk}/review-queue/"

    assert client_for(world_a.annotator).get(url).status_code == 403
    assert client_for(world_a.manager).get(url).status_code == 200


def test_annotators_get_no_job_stats_with_other_annotators_accuracy(world_a, client_for):
    url = f"/api/label-jobs/{world_a.label_job.pk}/"

    as_annotator = client_for(world_a.annotator).get(url).json()
    as_manager = client_for(world_a.manager).get(url).json()

    assert as_annotator["stats"] is None
    assert "annotator-qzalpha" not in str(as_annotator)
    assert [a["name"] for a in as_manager["stats"]["annotators"]] != []


def test_field_members_read_no_annotations(world_a, client_for):
    assert client_for(world_a.field).get("/api/annotations/").status_code == 403
    assert client_for(world_a.field).get("/api/assignments/").status_code == 403
    assert client_for(world_a.annotator).get("/api/annotations/").status_code == 200


def test_a_gold_claim_does_not_tell_the_annotator_it_is_gold(world_a, client_for):
    dataset, (episode,) = captured_dataset(world_a, 1)
    job = label_job_create(dataset=dataset, actor=world_a.manager, gold_share=1, overlap_share=0)
    made = client_for(world_a.manager).post(
        "/api/gold-labels/",
        {"episode": episode.pk, "condition_values": [world_a.values[1].pk], "outcome": "success"},
        content_type="application/json",
    )
    annotator = client_for(world_a.annotator)

    claim = annotator.post(f"/api/label-jobs/{job.pk}/next/")
    listing = annotator.get("/api/assignments/").json()
    gold = annotator.get("/api/gold-labels/")

    assert made.status_code == 201, made.content
    assert Episode.objects.get(pk=episode.pk).label_status == "accepted"
    assert claim.status_code == 200, claim.content
    assert claim.json()["episode"] == episode.pk
    assert claim.json()["label_status"] is None
    assert all(row["label_status"] is None for row in listing["results"])
    assert gold.status_code == 403


def test_field_reports_failures_but_only_managers_correct_or_remove_them(world_a, client_for):
    field = client_for(world_a.field)
    url = f"/api/failure-records/{world_a.failure_record.pk}/"

    created = field.post(
        "/api/failure-records/",
        {
            "deployment": world_a.deployment.pk,
            "failure_mode": world_a.failure_mode.pk,
            "occurred_at": "2026-11-30T10:00:00Z",
            "intervention": True,
            "notes": "slipped on worn box",
        },
        content_type="application/json",
    )
    patched = field.patch(url, {"notes": "moved"}, content_type="application/json")
    deleted = field.delete(url)
    corrected = client_for(world_a.manager).patch(
        url, {"notes": "checked"}, content_type="application/json"
    )

    assert created.status_code == 201, created.content
    assert (patched.status_code, deleted.status_code) == (403, 403)
    assert corrected.status_code == 200
    assert FailureRecord.objects.filter(pk=world_a.failure_record.pk, notes="checked").exists()
    audited = set(
        AuditEvent.objects.filter(object_type="sites.FailureRecord").values_list("verb", "actor")
    )
    assert ("api_create", world_a.field.pk) in audited
    assert ("api_update", world_a.manager.pk) in audited


def test_deleting_a_site_still_in_use_is_a_409_naming_what_uses_it(world_a, client_for):
    response = client_for(world_a.manager).delete(f"/api/sites/{world_a.site.pk}/")

    assert response.status_code == 409
    assert "deployment" in response.json()["detail"]
    assert not AuditEvent.objects.filter(verb="api_delete").exists()


# --- reviews: decided once ------------------------------------------------------------------


def _labelled_episode(world):
    dataset, (episode,) = captured_dataset(world, 1)
    job = label_job_create(dataset=dataset, actor=world.manager, gold_share=0, overlap_share=0)
    assignment = label_next(annotator=world.annotator, job=job)
    annotation_submit(
        assignment=assignment,
        actor=world.annotator,
        value_ids=[world.values[1].pk],
        outcome="success",
        failure_mode_id=None,
        flagged=True,
    )
    episode.refresh_from_db()
    assert episode.label_status == "labelled"
    return episode


def _accept(episode, world):
    return {
        "episode": episode.pk,
        "decision": "accept",
        "condition_values": [world.values[0].pk],
        "outcome": "success",
    }


def test_accepting_an_already_accepted_episode_is_a_409_and_changes_nothing(world_a, client_for):
    episode = _labelled_episode(world_a)
    client = client_for(world_a.manager)
    first = client.post("/api/reviews/", _accept(episode, world_a), content_type="application/json")
    episode.refresh_from_db()
    labels_after_first = (episode.condition_set_id, episode.extra["labels"])

    again = client.post(
        "/api/reviews/",
        {**_accept(episode, world_a), "condition_values": [world_a.values[1].pk]},
        content_type="application/json",
    )

    episode.refresh_from_db()
    assert first.status_code == 201
    assert again.status_code == 409
    assert "already accepted" in again.json()["detail"]
    assert Review.objects.filter(episode=episode).count() == 1
    assert (episode.condition_set_id, episode.extra["labels"]) == labels_after_first


def _parallel(n, request):
    """Run ``request(client)`` from n threads at once, each with its own connection."""
    barrier = threading.Barrier(n)
    results: list[int] = []
    lock = threading.Lock()

    def work():
        try:
            client = Client()
            barrier.wait()
            code = request(client)
            with lock:
                results.append(code)
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results)


@pytest.mark.django_db(transaction=True)
def test_ten_parallel_identical_reviews_store_one_review(world_a):
    episode = _labelled_episode(world_a)
    body = _accept(episode, world_a)

    def review(client):
        client.force_login(world_a.manager)
        return client.post("/api/reviews/", body, content_type="application/json").status_code

    codes = _parallel(10, review)

    assert codes == [201] + [409] * 9
    assert Review.objects.filter(episode=episode).count() == 1
    assert AuditEvent.objects.filter(verb="review_accept", object_id=str(episode.pk)).count() == 1


@pytest.mark.django_db(transaction=True)
def test_parallel_gold_labels_for_one_episode_keep_one_gold_label(world_a):
    from labeling.models import GoldLabel

    dataset, (episode,) = captured_dataset(world_a, 1)
    label_job_create(dataset=dataset, actor=world_a.manager, gold_share=0, overlap_share=0)
    body = {"episode": episode.pk, "condition_values": [world_a.values[1].pk], "outcome": "success"}

    def gold(client):
        client.force_login(world_a.manager)
        return client.post("/api/gold-labels/", body, content_type="application/json").status_code

    codes = _parallel(8, gold)

    assert codes == [201] * 8
    assert GoldLabel.objects.filter(episode=episode).count() == 1


@pytest.mark.django_db(transaction=True)
def test_parallel_claims_hand_each_episode_to_one_annotator_once(world_a):
    from labeling.models import LabelAssignment

    dataset, episodes = captured_dataset(world_a, 4)
    job = label_job_create(dataset=dataset, actor=world_a.manager, gold_share=0, overlap_share=0)
    annotators = [member(world_a.operator, Role.ANNOTATOR, f"ann-par-{i}") for i in range(6)]
    it = iter(annotators)
    pick = threading.Lock()

    def claim(client):
        with pick:
            user = next(it)
        client.force_login(user)
        return client.post(f"/api/label-jobs/{job.pk}/next/").status_code

    codes = _parallel(6, claim)

    assert all(code in (200, 204) for code in codes), codes
    assigned = list(LabelAssignment.objects.filter(job=job).values_list("episode_id", flat=True))
    assert len(assigned) == len(set(assigned)) == codes.count(200) == 4


@pytest.mark.django_db(transaction=True)
def test_parallel_transitions_of_one_round_move_it_once(world_a):
    round = world_a.round

    def transition(client):
        client.force_login(world_a.manager)
        return client.post(
            f"/api/rounds/{round.pk}/transition/",
            {"to_status": "planned"},
            content_type="application/json",
        ).status_code

    codes = _parallel(6, transition)

    round.refresh_from_db()
    assert all(code in (200, 409) for code in codes), codes
    assert round.status == "planned"
