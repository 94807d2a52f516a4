"""Writes for labelling: jobs, the annotators' queue, annotations, reviews and gold labels.

An episode's ``label_status`` in a job moves

    unlabelled → in_progress (claimed) → accepted                      (the accept rule)
                                       → labelled (awaiting review) → accepted / rejected

**The accept rule**, applied when an episode's last required annotation arrives:

* gold episodes are accepted with their gold labels when they are marked gold; answers on
  them only score the annotators;
* an answer flagged "send to review" sends the episode to review;
* an episode labelled by several annotators (the job's overlap) is accepted when they all
  gave the same answer on every label (each condition dimension of the job, the outcome,
  the failure mode); any difference sends it to review;
* an episode labelled once is accepted unless its annotator's accuracy on the job's gold
  episodes (every label of every gold episode they answered) is below the job's threshold;
  then it goes to review. Before answering any gold episode nobody is below the threshold.

**Accepting** writes the labels back to the episode — its condition set (the labelled
dimensions replaced, the others kept), outcome and failure mode — and keeps what the
protocol intended in ``extra["intended"]``, so the next gap report counts what was really
captured. It never touches ``validated``: capture validation owns that.

**The queue** hands each annotator the next item with ``SELECT ... FOR UPDATE SKIP LOCKED``
and counts the claim on the item in the same transaction; the check constraint
``claims <= required`` (see :class:`labeling.models.LabelItem`) makes a second claim on a
single-annotation episode impossible even if two requests race, and the unique
(episode, annotator) constraint means nobody gets the same episode twice. A claim that is
not finished within the job's ``claim_minutes`` is released for someone else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from accounts.services import audit_record
from labeling.labels.selectors import (
    PENDING,
    LabelSchema,
    annotator_gold_accuracy,
    label_schema,
)
from labeling.models import (
    Annotation,
    Dataset,
    Episode,
    GoldLabel,
    LabelAssignment,
    LabelItem,
    LabelJob,
    Review,
)
from sites.models import ConditionDimension, ConditionValue
from sites.services import condition_sets_intern

ADVISORY_NAMESPACE = 7401  # pg_advisory locks of label jobs: (namespace, job id)


class LabelingError(Exception):
    """A labelling request that cannot be carried out; the message says what to do."""


class AlreadyDecided(LabelingError):
    """The episode was accepted or rejected already: a second decision is refused."""


DECIDED = (Episode.LabelStatus.ACCEPTED, Episode.LabelStatus.REJECTED)


# --- jobs -----------------------------------------------------------------------------------


def _check_settings(
    *,
    overlap_share: float,
    annotators_per_overlap: int,
    gold_share: float,
    accuracy_threshold: float,
    claim_minutes: int,
) -> None:
    problems = []
    if not 0 <= overlap_share <= 1:
        problems.append(f"overlap share must be within 0..1, got {overlap_share}")
    if not 2 <= annotators_per_overlap <= 10:
        problems.append(
            f"annotators per overlapped episode must be 2..10, got {annotators_per_overlap}"
        )
    if not 0 <= gold_share <= 1:
        problems.append(f"gold share must be within 0..1, got {gold_share}")
    if not 0 <= accuracy_threshold <= 1:
        problems.append(f"accuracy threshold must be within 0..1, got {accuracy_threshold}")
    if claim_minutes < 1:
        problems.append(f"claims must last at least a minute, got {claim_minutes}")
    if problems:
        raise LabelingError("; ".join(problems))


def _dimension_ids(organization_id: int, dimensions: Iterable[int | str] | None) -> list[int]:
    wanted = [d for d in dimensions or [] if d not in ("", None)]
    if not wanted:
        return []
    known = {
        key: pk
        for pk, slug in ConditionDimension.objects.filter(
            organization_id=organization_id
        ).values_list("pk", "slug")
        for key in (pk, str(pk), slug)
    }
    unknown = [str(d) for d in wanted if d not in known]
    if unknown:
        raise LabelingError(f"unknown condition dimensions: {', '.join(unknown)}")
    return sorted({known[d] for d in wanted})


def label_job_create(
    *,
    dataset: Dataset,
    actor: Any,
    overlap_share: float = 0.2,
    annotators_per_overlap: int = 2,
    gold_share: float = 0.1,
    accuracy_threshold: float = 0.8,
    dimensions: Iterable[int | str] | None = None,
    claim_minutes: int = 30,
    instructions: str = "",
) -> LabelJob:
    """Create the dataset's label job with an item per single-episode row.

    Raises LabelingError when the dataset already has a job, a setting is out of range or a
    dimension is unknown.
    """
    _check_settings(
        overlap_share=overlap_share,
        annotators_per_overlap=annotators_per_overlap,
        gold_share=gold_share,
        accuracy_threshold=accuracy_threshold,
        claim_minutes=claim_minutes,
    )
    dims = _dimension_ids(dataset.organization_id, dimensions)
    if LabelJob.objects.filter(dataset=dataset).exists():
        raise LabelingError(f"{dataset.name} already has a label job.")
    try:
        with transaction.atomic():
            job = LabelJob.objects.create(
                organization_id=dataset.organization_id,
                dataset=dataset,
                overlap_share=overlap_share,
                annotators_per_overlap=annotators_per_overlap,
                gold_share=gold_share,
                accuracy_threshold=accuracy_threshold,
                dimensions=dims,
                claim_minutes=claim_minutes,
                instructions=instructions,
                created_by=actor if getattr(actor, "pk", None) else None,
            )
            added = label_job_sync_items(job=job)
            audit_record(
                organization=job.organization_id,
                actor=actor,
                verb="create",
                obj=job,
                changes={"items": added, "overlap_share": overlap_share, "dimensions": dims},
            )
    except IntegrityError:
        raise LabelingError(f"{dataset.name} already has a label job.") from None
    return job


def label_job_sync_items(*, job: LabelJob) -> int:
    """Add an item for each single-episode row of the dataset that has none; return how many.

    The job's overlap share of the new items (chosen by a hash of episode and job, so the
    choice is stable) needs ``annotators_per_overlap`` annotations; episodes with gold
    labels become gold items.
    """
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO labeling_labelitem (job_id, episode_id, required, claims, is_gold)
            SELECT %(job)s, n.id,
                   CASE WHEN NOT n.gold AND n.rank <= round(%(share)s * n.total) THEN %(k)s ELSE 1 END,
                   0, n.gold
            FROM (
                SELECT e.id, g.id IS NOT NULL AS gold,
                       row_number() OVER (ORDER BY md5(e.id::text || ':' || %(job)s::text)) AS rank,
                       count(*) OVER () AS total
                FROM labeling_episode e
                LEFT JOIN labeling_goldlabel g ON g.episode_id = e.id
                WHERE e.dataset_id = %(dataset)s AND e.episode_count = 1
                  AND NOT EXISTS (SELECT 1 FROM labeling_labelitem i WHERE i.episode_id = e.id)
            ) n
            ON CONFLICT (episode_id) DO NOTHING
            """,
            {
                "job": job.pk,
                "dataset": job.dataset_id,
                "share": job.overlap_share,
                "k": job.annotators_per_overlap,
            },
        )
        return int(cur.rowcount)


def label_job_update(*, job: LabelJob, actor: Any, **changes: Any) -> LabelJob:
    """Change a job's settings; a new overlap re-plans the items nobody has started.

    Accepts status, overlap_share, annotators_per_overlap, gold_share, accuracy_threshold,
    dimensions, claim_minutes, instructions. Raises LabelingError on bad values.
    """
    allowed = {
        "status",
        "overlap_share",
        "annotators_per_overlap",
        "gold_share",
        "accuracy_threshold",
        "dimensions",
        "claim_minutes",
        "instructions",
    }
    unknown = set(changes) - allowed
    if unknown:
        raise LabelingError(f"unknown settings: {', '.join(sorted(unknown))}")
    values = {k: getattr(job, k) for k in allowed} | changes
    if values["status"] not in LabelJob.Status.values:
        raise LabelingError(f"status must be open or closed, got {values['status']!r}")
    _check_settings(
        overlap_share=float(values["overlap_share"]),
        annotators_per_overlap=int(values["annotators_per_overlap"]),
        gold_share=float(values["gold_share"]),
        accuracy_threshold=float(values["accuracy_threshold"]),
        claim_minutes=int(values["claim_minutes"]),
    )
    if "dimensions" in changes:
        values["dimensions"] = _dimension_ids(job.organization_id, changes["dimensions"])
    replan = (
        values["overlap_share"] != job.overlap_share
        or values["annotators_per_overlap"] != job.annotators_per_overlap
    )
    with transaction.atomic():
        before = {k: getattr(job, k) for k in changes}
        for key, value in values.items():
            setattr(job, key, value)
        job.save()
        if replan:
            _replan_unstarted(job)
        audit_record(
            organization=job.organization_id,
            actor=actor,
            verb="update",
            obj=job,
            changes={
                k: [before[k], getattr(job, k)] for k in changes if before[k] != getattr(job, k)
            },
        )
    return job


def _replan_unstarted(job: LabelJob) -> None:
    with connection.cursor() as cur:
        cur.execute(
            """
            UPDATE labeling_labelitem i
            SET required = CASE WHEN n.rank <= round(%(share)s * n.total) THEN %(k)s ELSE 1 END
            FROM (
                SELECT i2.id,
                       row_number() OVER (ORDER BY md5(i2.episode_id::text || ':' || %(job)s::text)) AS rank,
                       count(*) OVER () AS total
                FROM labeling_labelitem i2
                JOIN labeling_episode e ON e.id = i2.episode_id
                WHERE i2.job_id = %(job)s AND i2.claims = 0 AND NOT i2.is_gold
                  AND e.label_status = 'unlabelled'
            ) n
            WHERE i.id = n.id
            """,
            {"job": job.pk, "share": job.overlap_share, "k": job.annotators_per_overlap},
        )


# --- the queue ----------------------------------------------------------------------------------


def label_next(*, annotator: Any, job: LabelJob) -> LabelAssignment | None:
    """Hand the annotator their open claim in the job, or claim the next episode for them.

    Returns None when nothing is left for this annotator. Gold episodes are mixed in at the
    job's gold share. Raises LabelingError when the job is closed.
    """
    if job.status != LabelJob.Status.OPEN:
        raise LabelingError("This label job is closed.")
    for _attempt in range(3):
        try:
            return _claim_next(annotator_id=annotator.pk, job=job)
        except IntegrityError:
            # Two requests of the same person raced (a double click), or a claim lost a
            # race the constraint caught: the next round sees what the other one did.
            continue
    return LabelAssignment.objects.filter(
        job=job, annotator_id=annotator.pk, status=LabelAssignment.Status.ASSIGNED
    ).first()


def _claim_next(*, annotator_id: int, job: LabelJob) -> LabelAssignment | None:
    now = timezone.now()
    expires = now + timedelta(minutes=job.claim_minutes)
    with transaction.atomic():
        open_claim = (
            LabelAssignment.objects.select_for_update()
            .filter(job=job, annotator_id=annotator_id, status=LabelAssignment.Status.ASSIGNED)
            .first()
        )
        if open_claim is not None:
            LabelAssignment.objects.filter(pk=open_claim.pk).update(expires_at=expires)
            open_claim.expires_at = expires
            return open_claim
        _release_stale(job=job, now=now)
        found = _pick(job=job, annotator_id=annotator_id)
        if found is None and label_job_sync_items(job=job):
            found = _pick(job=job, annotator_id=annotator_id)
        if found is None:
            return None
        item_id, episode_id = found
        LabelItem.objects.filter(pk=item_id).update(claims=F("claims") + 1)
        assignment = LabelAssignment.objects.create(
            job=job,
            item_id=item_id,
            episode_id=episode_id,
            annotator_id=annotator_id,
            assigned_at=now,
            expires_at=expires,
        )
        Episode.objects.filter(pk=episode_id, label_status=Episode.LabelStatus.UNLABELLED).update(
            label_status=Episode.LabelStatus.IN_PROGRESS, updated_at=now
        )
        return assignment


def _wants_gold(job: LabelJob, annotator_id: int) -> bool:
    if job.gold_share <= 0:
        return False
    mine = LabelAssignment.objects.filter(job=job, annotator_id=annotator_id).exclude(
        status=LabelAssignment.Status.SKIPPED
    )
    total = mine.count()
    gold = mine.filter(item__is_gold=True).count()
    return gold < job.gold_share * (total + 1)


_PICK = """
    SELECT i.id, i.episode_id FROM labeling_labelitem i
    JOIN labeling_episode e ON e.id = i.episode_id
    WHERE i.job_id = %(job)s AND i.is_gold = %(gold)s
      AND (i.is_gold OR (i.claims < i.required AND e.label_status IN ('unlabelled', 'in_progress')))
      AND NOT EXISTS (
          SELECT 1 FROM labeling_labelassignment a
          WHERE a.episode_id = i.episode_id AND a.annotator_id = %(me)s)
    ORDER BY i.claims DESC, i.id
    LIMIT 1
    FOR UPDATE OF i SKIP LOCKED
"""


def _pick(*, job: LabelJob, annotator_id: int) -> tuple[int, int] | None:
    """Lock the next item for this annotator; items other requests hold are skipped.

    Overlapped episodes someone has started come first, so disagreements surface early.
    Under READ COMMITTED a row another claim changed after this statement began is
    re-checked against ``claims < required`` before it is locked.
    """
    order = (True, False) if _wants_gold(job, annotator_id) else (False,)
    with connection.cursor() as cur:
        for gold in order:
            cur.execute(_PICK, {"job": job.pk, "gold": gold, "me": annotator_id})
            row = cur.fetchone()
            if row is not None:
                return int(row[0]), int(row[1])
    return None


def _release_stale(*, job: LabelJob, now: datetime) -> None:
    """Release claims older than the job's claim time (one request at a time per job)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [ADVISORY_NAMESPACE, job.pk])
        row = cur.fetchone()
        if not row or not row[0]:
            return
        cur.execute(
            """
            WITH stale AS (
                DELETE FROM labeling_labelassignment
                WHERE job_id = %(job)s AND status = 'assigned' AND expires_at < %(now)s
                RETURNING item_id
            ), freed AS (
                UPDATE labeling_labelitem i SET claims = i.claims - s.n
                FROM (SELECT item_id, count(*) AS n FROM stale GROUP BY item_id) s
                WHERE i.id = s.item_id
                RETURNING i.episode_id, i.claims
            )
            UPDATE labeling_episode e SET label_status = 'unlabelled', updated_at = %(now)s
            FROM freed f
            WHERE e.id = f.episode_id AND f.claims = 0 AND e.label_status = 'in_progress'
            """,
            {"job": job.pk, "now": now},
        )


def _locked_assignment(assignment: LabelAssignment, actor: Any) -> LabelAssignment:
    locked = LabelAssignment.objects.select_for_update().filter(pk=assignment.pk).first()
    if locked is None:
        raise LabelingError(
            "This claim ran out and was released to someone else; take the next episode."
        )
    if locked.annotator_id != getattr(actor, "pk", None):
        raise LabelingError("This episode was handed to someone else.")
    if locked.status != LabelAssignment.Status.ASSIGNED:
        raise LabelingError(f"This episode is already {locked.get_status_display().lower()}.")
    return locked


def assignment_skip(*, assignment: LabelAssignment, actor: Any) -> None:
    """Give the episode back (it goes to someone else; never to this annotator again).

    Raises LabelingError when the assignment is not the actor's open claim.
    """
    now = timezone.now()
    with transaction.atomic():
        locked = _locked_assignment(assignment, actor)
        LabelAssignment.objects.filter(pk=locked.pk).update(
            status=LabelAssignment.Status.SKIPPED, finished_at=now
        )
        LabelItem.objects.filter(pk=locked.item_id).update(claims=F("claims") - 1)
        item = LabelItem.objects.get(pk=locked.item_id)
        if item.claims == 0:
            Episode.objects.filter(
                pk=locked.episode_id, label_status=Episode.LabelStatus.IN_PROGRESS
            ).update(label_status=Episode.LabelStatus.UNLABELLED, updated_at=now)


# --- answers ----------------------------------------------------------------------------------


def _clean_answer(
    *,
    schema: LabelSchema,
    value_ids: Iterable[int | str],
    outcome: str,
    failure_mode_id: int | str | None,
) -> tuple[list[int], str, int | None]:
    """Check an answer against the job's schema; return (value ids, outcome, failure mode)."""
    problems = []
    ids: list[int] = []
    for raw in value_ids:
        if raw in ("", None):
            continue
        try:
            ids.append(int(raw))
        except (TypeError, ValueError):
            problems.append(f"condition value {raw!r} is not an id")
    seen: dict[int, int] = {}
    for v in ids:
        dim = schema.value_dimension.get(v)
        if dim is None:
            problems.append(f"condition value {v} is not one this job labels")
        elif dim in seen and seen[dim] != v:
            name = next(d.name for d in schema.dimensions if d.id == dim)
            problems.append(f"{name} has two values; pick one")
        else:
            seen[dim] = v
    if outcome not in Episode.Outcome.values:
        problems.append(f"outcome must be success, failure or unknown, got {outcome!r}")
    mode: int | None = None
    if failure_mode_id not in ("", None):
        try:
            mode = int(failure_mode_id)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            problems.append(f"failure mode {failure_mode_id!r} is not an id")
        else:
            if outcome != Episode.Outcome.FAILURE:
                problems.append("a failure mode applies only when the outcome is failure")
            elif mode not in {m.id for m in schema.failure_modes}:
                problems.append(f"failure mode {mode} is not in the failure taxonomy")
    if problems:
        raise LabelingError("; ".join(problems))
    return sorted(set(ids)), outcome, mode


def annotation_submit(
    *,
    assignment: LabelAssignment,
    actor: Any,
    value_ids: Iterable[int | str],
    outcome: str,
    failure_mode_id: int | str | None = None,
    notes: str = "",
    seconds_spent: float | None = None,
    flagged: bool = False,
) -> Annotation:
    """Record the annotator's answer and settle the episode when its last answer is in.

    Raises LabelingError when the answer does not fit the job's schema or the assignment is
    not the actor's open claim (released, skipped, already answered, someone else's).
    """
    job = assignment.job
    schema = label_schema(job=job)
    ids, outcome, mode = _clean_answer(
        schema=schema,
        value_ids=value_ids,
        outcome=outcome,
        failure_mode_id=failure_mode_id,
    )
    if seconds_spent is not None and not 0 <= float(seconds_spent) < 86400:
        seconds_spent = None
    now = timezone.now()
    with transaction.atomic():
        locked = _locked_assignment(assignment, actor)
        annotation = Annotation.objects.create(
            assignment=locked,
            episode_id=locked.episode_id,
            annotator_id=locked.annotator_id,
            value_ids=ids,
            outcome=outcome,
            failure_mode_id=mode,
            notes=(notes or "").strip()[:4000],
            flagged=bool(flagged),
            seconds_spent=seconds_spent,
        )
        LabelAssignment.objects.filter(pk=locked.pk).update(
            status=LabelAssignment.Status.DONE, finished_at=now
        )
        item = LabelItem.objects.select_for_update().get(pk=locked.item_id)
        _settle(item=item, job=job, schema=schema)
    return annotation


def _settle(*, item: LabelItem, job: LabelJob, schema: LabelSchema) -> str:
    """Apply the accept rule to an item whose answers may all be in; return the new status."""
    episode = (
        Episode.objects.select_for_update(of=("self",))
        .select_related("condition_set")
        .get(pk=item.episode_id)
    )
    if item.is_gold or episode.label_status not in PENDING:
        return episode.label_status  # gold, or a reviewer decided already
    answers = list(
        Annotation.objects.filter(
            assignment__item=item, assignment__status=LabelAssignment.Status.DONE
        ).order_by("id")
    )
    now = timezone.now()
    if len(answers) < item.required:
        Episode.objects.filter(pk=episode.pk).update(
            label_status=Episode.LabelStatus.IN_PROGRESS, updated_at=now
        )
        return Episode.LabelStatus.IN_PROGRESS
    vectors = [schema.vector(a.value_ids, a.outcome, a.failure_mode_id) for a in answers]
    if any(a.flagged for a in answers):
        accept = False
    elif len(answers) == 1:
        accuracy = annotator_gold_accuracy(
            job=job, annotator_id=answers[0].annotator_id, schema=schema
        )
        accept = accuracy is None or accuracy >= job.accuracy_threshold
    else:
        accept = all(v == vectors[0] for v in vectors[1:])
    if not accept:
        Episode.objects.filter(pk=episode.pk).update(
            label_status=Episode.LabelStatus.LABELLED, updated_at=now
        )
        return Episode.LabelStatus.LABELLED
    first = answers[0]
    labels_apply(
        episode=episode,
        dimension_ids=schema.dimension_ids,
        value_ids=first.value_ids,
        outcome=first.outcome,
        failure_mode_id=first.failure_mode_id,
        decided_by="agreement" if len(answers) > 1 else "single annotation",
    )
    return Episode.LabelStatus.ACCEPTED


def labels_apply(
    *,
    episode: Episode,
    dimension_ids: Sequence[int],
    value_ids: Sequence[int],
    outcome: str,
    failure_mode_id: int | None,
    decided_by: str,
) -> None:
    """Write accepted labels to the episode: the labelled dimensions' values replace the
    intended ones (the other dimensions keep theirs), with outcome and failure mode; the
    episode becomes accepted. The first labels applied keep the protocol's intent in
    ``extra["intended"]``."""
    current = list(episode.condition_set.value_ids) if episode.condition_set is not None else []
    labelled = set(dimension_ids)
    dimension_of = dict(
        ConditionValue.objects.filter(pk__in=set(current)).values_list("pk", "dimension_id")
    )
    kept = [v for v in current if dimension_of.get(v) not in labelled]
    combined = tuple(sorted(set(kept) | {int(v) for v in value_ids}))
    condition_set_id = (
        condition_sets_intern(organization=episode.organization_id, combinations=[combined])[
            combined
        ]
        if combined
        else None
    )
    now = timezone.now()
    extra = dict(episode.extra or {})
    extra.setdefault(
        "intended",
        {"value_ids": current, "outcome": episode.outcome, "failure_mode": episode.failure_mode_id},
    )
    extra["labels"] = {"decided_by": decided_by, "at": now.isoformat()}
    mode = failure_mode_id if outcome == Episode.Outcome.FAILURE else None
    Episode.objects.filter(pk=episode.pk).update(
        condition_set_id=condition_set_id,
        outcome=outcome,
        failure_mode_id=mode,
        label_status=Episode.LabelStatus.ACCEPTED,
        extra=extra,
        updated_at=now,
    )


# --- review and gold -----------------------------------------------------------------------------


def _job_of(episode: Episode) -> LabelJob:
    item = LabelItem.objects.select_related("job").filter(episode=episode).first()
    if item is None:
        raise LabelingError(f"Episode {episode.key} is not in a label job.")
    return item.job


def review_resolve(
    *,
    episode: Episode,
    reviewer: Any,
    decision: str,
    value_ids: Iterable[int | str] = (),
    outcome: str = Episode.Outcome.UNKNOWN,
    failure_mode_id: int | str | None = None,
    reason: str = "",
    make_gold: bool = False,
) -> Review:
    """Decide an episode: accept it with the resolved labels, or reject it with a reason.

    ``make_gold`` also keeps the resolved labels as gold, to score annotators. Raises
    LabelingError on a bad decision, a reject without a reason, labels that do not fit the
    job, or an episode outside a label job.
    """
    job = _job_of(episode)
    reason = (reason or "").strip()
    if decision not in Review.Decision.values:
        raise LabelingError(f"decision must be accept or reject, got {decision!r}")
    schema = label_schema(job=job)
    ids: list[int] = []
    mode: int | None = None
    if decision == Review.Decision.ACCEPT:
        ids, outcome, mode = _clean_answer(
            schema=schema,
            value_ids=value_ids,
            outcome=outcome,
            failure_mode_id=failure_mode_id,
        )
    elif not reason:
        raise LabelingError(
            "Say why the episode is rejected: the reason is what the export reports."
        )
    else:
        outcome = Episode.Outcome.UNKNOWN
    now = timezone.now()
    with transaction.atomic():
        locked = (
            Episode.objects.select_for_update(of=("self",))
            .select_related("condition_set")
            .get(pk=episode.pk)
        )
        if locked.label_status in DECIDED:
            # The lock makes parallel identical reviews queue here: the first decides, the
            # rest are told so instead of writing the labels again.
            earlier = Review.objects.filter(episode=locked).order_by("-created_at").first()
            by = f" by review #{earlier.pk}" if earlier is not None else ""
            raise AlreadyDecided(
                f"Episode {locked.key} is already {locked.get_label_status_display().lower()}"
                f"{by}; it is not awaiting a decision."
            )
        review = Review.objects.create(
            organization_id=job.organization_id,
            job=job,
            episode=locked,
            reviewer=reviewer,
            decision=decision,
            value_ids=ids,
            outcome=outcome,
            failure_mode_id=mode,
            reason=reason[:4000],
        )
        if decision == Review.Decision.ACCEPT:
            labels_apply(
                episode=locked,
                dimension_ids=schema.dimension_ids,
                value_ids=ids,
                outcome=outcome,
                failure_mode_id=mode,
                decided_by="review",
            )
            if make_gold:
                _gold_store(
                    episode=locked, actor=reviewer, value_ids=ids, outcome=outcome, mode=mode
                )
        else:
            extra = dict(locked.extra or {})
            extra["labels"] = {
                "decided_by": "review",
                "at": now.isoformat(),
                "rejected": reason[:500],
            }
            Episode.objects.filter(pk=locked.pk).update(
                label_status=Episode.LabelStatus.REJECTED, extra=extra, updated_at=now
            )
        audit_record(
            organization=job.organization_id,
            actor=reviewer,
            verb=f"review_{decision}",
            obj=locked,
            changes={"review": review.pk, "reason": reason[:200]}
            if reason
            else {"review": review.pk},
        )
    return review


def _gold_store(
    *, episode: Episode, actor: Any, value_ids: list[int], outcome: str, mode: int | None
) -> GoldLabel:
    gold, _ = GoldLabel.objects.update_or_create(
        episode=episode,
        defaults={
            "organization_id": episode.organization_id,
            "value_ids": value_ids,
            "outcome": outcome,
            "failure_mode_id": mode,
            "created_by": actor if getattr(actor, "pk", None) else None,
        },
    )
    LabelItem.objects.filter(episode=episode).update(is_gold=True)
    return gold


def gold_label_set(
    *,
    episode: Episode,
    actor: Any,
    value_ids: Iterable[int | str],
    outcome: str,
    failure_mode_id: int | str | None = None,
) -> GoldLabel:
    """Make the episode a gold episode with known labels (and accept it with them).

    Every annotator of the job will be handed it once; their answers score their accuracy.
    Raises LabelingError when the labels do not fit the job or the episode is in no job.
    """
    job = _job_of(episode)
    schema = label_schema(job=job)
    ids, outcome, mode = _clean_answer(
        schema=schema,
        value_ids=value_ids,
        outcome=outcome,
        failure_mode_id=failure_mode_id,
    )
    with transaction.atomic():
        locked = (
            Episode.objects.select_for_update(of=("self",))
            .select_related("condition_set")
            .get(pk=episode.pk)
        )
        gold = _gold_store(episode=locked, actor=actor, value_ids=ids, outcome=outcome, mode=mode)
        labels_apply(
            episode=locked,
            dimension_ids=schema.dimension_ids,
            value_ids=ids,
            outcome=outcome,
            failure_mode_id=mode,
            decided_by="gold",
        )
        audit_record(organization=job.organization_id, actor=actor, verb="gold", obj=locked)
    return gold
