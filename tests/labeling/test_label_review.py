"""The accept rule, review of disagreements, gold accuracy, and labels back into coverage."""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent, Role
from labeling.labels.selectors import job_stats, label_schema, review_queue
from labeling.labels.services import (
    LabelingError,
    annotation_submit,
    gold_label_set,
    label_job_create,
    label_next,
    review_resolve,
)
from labeling.models import Episode, Review
from sites.models import ConditionValue
from tests.factories import captured_dataset, member


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def second(world_a):
    return member(world_a.operator, Role.ANNOTATOR, "annotator-two-qzalpha")


def values_of(episode):
    episode.refresh_from_db()
    ids = episode.condition_set.value_ids if episode.condition_set else []
    return {
        (v.dimension.slug, v.slug)
        for v in ConditionValue.objects.filter(pk__in=ids).select_related("dimension")
    }


def value(world, dim, slug):
    return ConditionValue.objects.get(
        dimension__organization=world.operator, dimension__slug=dim, slug=slug
    )


def answer(job, user, *values, outcome="success", mode=None, flagged=False):
    assignment = label_next(annotator=user, job=job)
    assert assignment is not None
    annotation_submit(
        assignment=assignment,
        actor=user,
        value_ids=[v.pk for v in values],
        outcome=outcome,
        failure_mode_id=mode,
        flagged=flagged,
    )
    return Episode.objects.get(pk=assignment.episode_id)


def test_a_single_answer_is_accepted_and_written_back_to_the_episode(media, world_a):
    dataset, (episode,) = captured_dataset(world_a, 1, intended="dim")
    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=0, gold_share=0)

    labelled = answer(
        job,
        world_a.annotator,
        value(world_a, "lighting", "bright"),
        value(world_a, "clutter", "high"),
        outcome="failure",
        mode=world_a.failure_mode.pk,
    )

    assert labelled.label_status == "accepted"
    assert values_of(labelled) == {("lighting", "bright"), ("clutter", "high")}
    assert (labelled.outcome, labelled.failure_mode_id) == ("failure", world_a.failure_mode.pk)
    assert labelled.extra["intended"]["outcome"] == "success"
    assert set(labelled.extra["intended"]["value_ids"]) == {
        value(world_a, "lighting", "dim").pk,
        value(world_a, "clutter", "low").pk,
    }
    assert labelled.validated is True  # labels never touch capture validation


def test_dimensions_the_job_does_not_label_keep_their_values(media, world_a):
    dataset, (episode,) = captured_dataset(world_a, 1, intended="dim")
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=0,
        gold_share=0,
        dimensions=["lighting"],
    )

    labelled = answer(job, world_a.annotator, value(world_a, "lighting", "bright"))

    assert values_of(labelled) == {("lighting", "bright"), ("clutter", "low")}


def test_an_answer_outside_the_schema_is_refused(media, world_a):
    dataset, _ = captured_dataset(world_a, 1)
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=0,
        gold_share=0,
        dimensions=["lighting"],
    )
    assignment = label_next(annotator=world_a.annotator, job=job)

    for values, outcome, mode, message in [
        ([value(world_a, "clutter", "high").pk], "success", None, "not one this job labels"),
        ([world_a.values[0].pk, world_a.values[1].pk], "success", None, "two values"),
        ([], "maybe", None, "outcome must be"),
        ([], "success", world_a.failure_mode.pk, "only when the outcome is failure"),
    ]:
        with pytest.raises(LabelingError, match=message):
            annotation_submit(
                assignment=assignment,
                actor=world_a.annotator,
                value_ids=values,
                outcome=outcome,
                failure_mode_id=mode,
            )


def test_overlapped_answers_that_agree_are_accepted(media, world_a, second):
    dataset, _ = captured_dataset(world_a, 1)
    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=1, gold_share=0)
    bright = value(world_a, "lighting", "bright")
    low = value(world_a, "clutter", "low")

    first = answer(job, world_a.annotator, bright, low)
    assert first.label_status == "in_progress"
    both = answer(job, second, bright, low)

    assert both.label_status == "accepted"
    assert both.extra["labels"]["decided_by"] == "agreement"


def test_a_disagreement_flows_to_review_and_the_resolution_is_written_back(media, world_a, second):
    dataset, (episode,) = captured_dataset(world_a, 1, intended="dim")
    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=1, gold_share=0)
    low = value(world_a, "clutter", "low")

    answer(job, world_a.annotator, value(world_a, "lighting", "bright"), low)
    disputed = answer(job, second, value(world_a, "lighting", "dim"), low)

    assert disputed.label_status == "labelled"
    schema = label_schema(job=job)
    total, cases = review_queue(job=job, schema=schema)
    assert total == 1
    assert cases[0].episode.pk == episode.pk
    assert cases[0].disagreements == ["condition:lighting"]
    assert job_stats(job=job).progress.in_review == 1

    review = review_resolve(
        episode=episode,
        reviewer=world_a.manager,
        decision="accept",
        value_ids=[value(world_a, "lighting", "bright").pk, low.pk],
        outcome="success",
    )

    episode.refresh_from_db()
    assert episode.label_status == "accepted"
    assert values_of(episode) == {("lighting", "bright"), ("clutter", "low")}
    assert episode.extra["labels"]["decided_by"] == "review"
    assert review.decision == "accept"
    assert review_queue(job=job, schema=schema)[0] == 0
    assert AuditEvent.objects.filter(verb="review_accept", object_id=str(episode.pk)).exists()


def test_a_rejection_needs_a_reason_and_keeps_the_episode_out(media, world_a):
    dataset, (episode,) = captured_dataset(world_a, 1)
    label_job_create(dataset=dataset, actor=world_a.manager)

    with pytest.raises(LabelingError, match="why"):
        review_resolve(episode=episode, reviewer=world_a.manager, decision="reject")
    review_resolve(
        episode=episode, reviewer=world_a.manager, decision="reject", reason="gripper camera dark"
    )

    episode.refresh_from_db()
    assert episode.label_status == "rejected"
    assert Review.objects.get(episode=episode).reason == "gripper camera dark"
    assert not Episode.objects.countable().filter(pk=episode.pk).exists()


def test_a_flagged_answer_goes_to_review(media, world_a):
    dataset, _ = captured_dataset(world_a, 1)
    job = label_job_create(dataset=dataset, actor=world_a.manager, overlap_share=0, gold_share=0)

    flagged = answer(job, world_a.annotator, world_a.values[0], flagged=True)

    assert flagged.label_status == "labelled"


def test_an_annotator_below_the_gold_threshold_has_their_single_answers_reviewed(media, world_a):
    dataset, episodes = captured_dataset(world_a, 4)
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=0,
        gold_share=0.5,
        dimensions=["lighting"],
        accuracy_threshold=0.8,
    )
    gold_label_set(
        episode=episodes[0],
        actor=world_a.manager,
        value_ids=[value(world_a, "lighting", "bright").pk],
        outcome="failure",
        failure_mode_id=world_a.failure_mode.pk,
    )

    on_gold = answer(job, world_a.annotator, value(world_a, "lighting", "dim"), outcome="success")
    single = answer(job, world_a.annotator, value(world_a, "lighting", "dim"))

    assert on_gold.pk == episodes[0].pk
    assert on_gold.label_status == "accepted"  # gold keeps its gold labels
    assert values_of(on_gold) == {("lighting", "bright"), ("clutter", "low")}
    assert single.label_status == "labelled"  # 0 of 3 gold labels right: reviewed
    stats = job_stats(job=job)
    (row,) = stats.annotators
    assert row.gold_accuracy == pytest.approx(0.0)


def test_accepted_labels_move_coverage_to_the_cell_really_captured(media, world_a):
    from analytics.services.gap_inputs import campaign_inputs

    dataset, episodes = captured_dataset(world_a, 3, intended="dim")
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=0,
        gold_share=0,
        dimensions=["lighting"],
    )

    def train_at(slug):
        inputs = campaign_inputs(campaign=world_a.campaign, slugs=["lighting"])
        wanted = value(world_a, "lighting", slug).pk
        return sum(
            n
            for key, n in zip(inputs.keys, inputs.train_count, strict=True)
            if inputs.space.value_ids(key) == [wanted]
        )

    before_dim, before_bright = train_at("dim"), train_at("bright")
    for _ in episodes:
        answer(job, world_a.annotator, value(world_a, "lighting", "bright"))

    assert train_at("bright") == before_bright + 3
    assert train_at("dim") == before_dim - 3


def test_job_stats_report_throughput_agreement_and_exclusions(media, world_a, second):
    dataset, episodes = captured_dataset(world_a, 4)
    job = label_job_create(
        dataset=dataset,
        actor=world_a.manager,
        overlap_share=1,
        gold_share=0,
        dimensions=["lighting"],
    )
    bright, dim = value(world_a, "lighting", "bright"), value(world_a, "lighting", "dim")
    for mine, theirs in [(bright, bright), (dim, dim), (bright, dim), (dim, dim)]:
        answer(job, world_a.annotator, mine)
        answer(job, second, theirs)

    stats = job_stats(job=job)

    lighting = next(a for a in stats.agreement if a.label == "condition:lighting")
    assert lighting.result.method == "cohen"
    assert lighting.result.items == 4
    assert lighting.result.agreement == pytest.approx(0.75)
    # annotator: b d b d, second: b d d d -> p_o 0.75, p_e 0.5·0.25 + 0.5·0.75 = 0.5
    assert lighting.result.kappa == pytest.approx(0.5)
    assert stats.progress.accepted == 3 and stats.progress.in_review == 1
    assert sum(stats.per_day.values()) == 8
    assert {a.done for a in stats.annotators} == {4}
    reasons = {r.reason: r.rows for r in stats.eligibility.reasons}
    assert reasons == {"in_review": 1}
    assert stats.eligibility.rows == 3


def test_job_stats_median_seconds_is_the_interpolated_median_per_annotator(media, world_a, second):
    from statistics import median

    from labeling.models import Annotation

    dataset, _ = captured_dataset(world_a, 4)
    job = label_job_create(dataset=dataset, actor=world_a.manager, dimensions=["lighting"])
    bright = value(world_a, "lighting", "bright")
    for _ in range(4):
        answer(job, world_a.annotator, bright)
    spent = [50.0, 10.0, 40.0, 25.0]  # median 32.5, mean 31.25
    mine = Annotation.objects.filter(assignment__job=job, annotator=world_a.annotator).order_by(
        "id"
    )
    for annotation, seconds in zip(mine, spent, strict=True):
        Annotation.objects.filter(pk=annotation.pk).update(seconds_spent=seconds)

    stats = job_stats(job=job)

    row = next(a for a in stats.annotators if a.user_id == world_a.annotator.pk)
    assert row.median_seconds == pytest.approx(median(spent)) == pytest.approx(32.5)
