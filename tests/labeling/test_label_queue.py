"""The annotators' queue: claiming, overlap, skipping, stale claims, gold, and races."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import Role
from labeling.labels.services import (
    LabelingError,
    annotation_submit,
    assignment_skip,
    gold_label_set,
    label_job_create,
    label_next,
)
from labeling.models import Episode, LabelAssignment, LabelItem
from tests.factories import captured_dataset, member


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _job(world, n=4, overlap=0.0, gold=0.0, **kwargs):
    dataset, episodes = captured_dataset(world, n)
    job = label_job_create(
        dataset=dataset, actor=world.manager, overlap_share=overlap, gold_share=gold, **kwargs
    )
    return job, episodes


def _answer(assignment, user, lighting, outcome="success"):
    return annotation_submit(
        assignment=assignment, actor=user, value_ids=[lighting.pk], outcome=outcome
    )


def test_job_creation_makes_an_item_per_single_episode_with_the_overlap_share(media, world_a):
    dataset, episodes = captured_dataset(world_a, 11)
    Episode.objects.filter(pk=episodes[0].pk).update(episode_count=20)  # a summary row

    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=0.3)

    items = LabelItem.objects.filter(job=job)
    assert items.count() == 10
    assert items.filter(required=2).count() == 3
    assert not items.filter(episode=episodes[0]).exists()


def test_a_dataset_has_one_label_job(media, world_a):
    job, _ = _job(world_a)

    with pytest.raises(LabelingError, match="already has a label job"):
        label_job_create(dataset=job.dataset, actor=world_a.manager)


def test_next_hands_out_each_episode_once_and_resumes_an_open_claim(media, world_a):
    job, episodes = _job(world_a, n=2)

    first = label_next(annotator=world_a.annotator, job=job)
    again = label_next(annotator=world_a.annotator, job=job)

    assert first is not None and again.pk == first.pk
    assert Episode.objects.get(pk=first.episode_id).label_status == "in_progress"
    _answer(first, world_a.annotator, world_a.values[1])
    second = label_next(annotator=world_a.annotator, job=job)
    assert second.episode_id != first.episode_id
    _answer(second, world_a.annotator, world_a.values[1])
    assert label_next(annotator=world_a.annotator, job=job) is None


def test_a_single_annotation_episode_goes_to_one_annotator_only(media, world_a):
    job, _ = _job(world_a, n=1)
    other = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")

    mine = label_next(annotator=world_a.annotator, job=job)
    theirs = label_next(annotator=other, job=job)

    assert mine is not None
    assert theirs is None


def test_an_overlapped_episode_goes_to_two_annotators_and_never_twice_to_one(media, world_a):
    job, _ = _job(world_a, n=1, overlap=1.0)
    other = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    third = member(world_a.operator, Role.ANNOTATOR, "annotator-three-qzalpha")

    a = label_next(annotator=world_a.annotator, job=job)
    b = label_next(annotator=other, job=job)
    c = label_next(annotator=third, job=job)
    _answer(a, world_a.annotator, world_a.values[0])

    assert a.episode_id == b.episode_id
    assert c is None
    assert label_next(annotator=world_a.annotator, job=job) is None


def test_skipped_episodes_go_to_someone_else_and_not_back(media, world_a):
    job, _ = _job(world_a, n=1)
    other = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    mine = label_next(annotator=world_a.annotator, job=job)

    assignment_skip(assignment=mine, actor=world_a.annotator)

    assert Episode.objects.get(pk=mine.episode_id).label_status == "unlabelled"
    assert label_next(annotator=world_a.annotator, job=job) is None
    theirs = label_next(annotator=other, job=job)
    assert theirs.episode_id == mine.episode_id


def test_a_stale_claim_is_released_for_someone_else(media, world_a):
    job, _ = _job(world_a, n=1)
    other = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    mine = label_next(annotator=world_a.annotator, job=job)
    LabelAssignment.objects.filter(pk=mine.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )

    theirs = label_next(annotator=other, job=job)

    assert theirs is not None and theirs.episode_id == mine.episode_id
    assert not LabelAssignment.objects.filter(pk=mine.pk).exists()
    with pytest.raises(LabelingError, match="released"):
        _answer(mine, world_a.annotator, world_a.values[0])


def test_only_the_annotator_holding_a_claim_can_answer_or_skip_it(media, world_a):
    job, _ = _job(world_a, n=1)
    mine = label_next(annotator=world_a.annotator, job=job)

    with pytest.raises(LabelingError, match="someone else"):
        _answer(mine, world_a.manager, world_a.values[0])
    with pytest.raises(LabelingError, match="someone else"):
        assignment_skip(assignment=mine, actor=world_a.manager)


def test_a_closed_job_hands_out_nothing(media, world_a):
    job, _ = _job(world_a, n=1)
    job.status = "closed"
    job.save()

    with pytest.raises(LabelingError, match="closed"):
        label_next(annotator=world_a.annotator, job=job)


def test_episodes_captured_after_the_job_was_made_join_its_queue(media, world_a):
    job, episodes = _job(world_a, n=1)
    first = label_next(annotator=world_a.annotator, job=job)
    _answer(first, world_a.annotator, world_a.values[1])
    late = Episode.objects.create(
        organization=world_a.operator, dataset=job.dataset, key="late", frames=10
    )

    nxt = label_next(annotator=world_a.annotator, job=job)

    assert nxt.episode_id == late.pk


def test_gold_episodes_are_served_to_every_annotator_at_the_gold_share(media, world_a):
    job, episodes = _job(world_a, n=6, gold=0.5)
    other = member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")
    gold_label_set(
        episode=episodes[5],
        actor=world_a.manager,
        value_ids=[world_a.values[0].pk],
        outcome="success",
    )

    mine = label_next(annotator=world_a.annotator, job=job)
    theirs = label_next(annotator=other, job=job)

    assert mine.episode_id == episodes[5].pk == theirs.episode_id
    _answer(mine, world_a.annotator, world_a.values[0])
    assert label_next(annotator=world_a.annotator, job=job).episode_id != episodes[5].pk


@pytest.mark.django_db(transaction=True)
def test_two_annotators_racing_for_a_single_annotation_episode_get_it_once(settings, tmp_path):
    from tests.factories import build_world

    settings.MEDIA_ROOT = tmp_path / "media"
    world = build_world("qzrace")
    dataset, _ = captured_dataset(world, 1)
    job = label_job_create(dataset=dataset, actor=world.manager, overlap_share=0, gold_share=0)
    people = [world.annotator] + [
        member(world.operator, Role.ANNOTATOR, f"racer-{i}-qzrace") for i in range(5)
    ]
    barrier = threading.Barrier(len(people))
    results: dict[int, int | None] = {}
    errors: list[BaseException] = []

    def claim(user):
        try:
            barrier.wait(timeout=10)
            got = label_next(annotator=user, job=job)
            results[user.pk] = got.episode_id if got else None
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(u,)) for u in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert not errors, errors
    winners = [u for u, episode in results.items() if episode is not None]
    assert len(results) == len(people)
    assert len(winners) == 1
    assert LabelAssignment.objects.filter(job=job).count() == 1
    assert LabelItem.objects.get(job=job).claims == 1


@pytest.mark.django_db(transaction=True)
def test_racing_annotators_share_out_many_episodes_without_collisions(settings, tmp_path):
    from tests.factories import build_world

    settings.MEDIA_ROOT = tmp_path / "media"
    world = build_world("qzrace2")
    dataset, episodes = captured_dataset(world, 12)
    job = label_job_create(dataset=dataset, actor=world.manager, overlap_share=0, gold_share=0)
    people = [member(world.operator, Role.ANNOTATOR, f"worker-{i}-qzrace2") for i in range(4)]
    claimed: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(user):
        try:
            while True:
                got = label_next(annotator=user, job=job)
                if got is None:
                    return
                with lock:
                    claimed.append(got.episode_id)
                annotation_submit(
                    assignment=got, actor=user, value_ids=[world.values[0].pk], outcome="success"
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(u,)) for u in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert not errors, errors
    assert sorted(claimed) == sorted(e.pk for e in episodes)
    assert Episode.objects.filter(dataset=dataset, label_status="accepted").count() == 12
