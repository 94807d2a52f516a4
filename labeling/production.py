"""Interventions become data: each deployment's production dataset and its episodes.

An intervention (a :class:`~sites.models.FailureRecord`) with a recording becomes one episode
of its deployment's production dataset, so it is labelled, validated and exported like a field
capture. The recording arrives one of two ways:

* uploaded here, through the field recordings' resumable upload
  (``POST /api/failure-records/{id}/recordings/``, then the chunks): when it is stored,
  :func:`failure_record_recording_attach` makes the episode and links the recording to it
  (one take: the whole recording, linked as a field take of one recording is) before its
  validation is queued, so the verdict lands on the episode; the record's ``recording_ref``
  becomes the recording's id;
* kept elsewhere (``recording_ref`` a URI the fleet sent): :func:`failure_record_episode_ensure`
  lists the episode with that ``storage_uri`` and no media; it is not validated and so does
  not count as coverage until a recording is uploaded for it.

An episode is made once per record (a partial unique constraint on ``Episode.failure_record``);
replays return it.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from accounts.services import audit_record
from labeling.models import Dataset, Episode, LabelJob, Recording
from sites.models import Deployment, FailureRecord

URI = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def production_dataset_ensure(*, deployment: Deployment) -> Dataset:
    """Return the deployment's production dataset, creating it the first time.

    Its slug is ``production-<deployment slug>`` (suffixed with the deployment's id if a
    dataset of the organization already holds that slug); concurrent first calls make one.
    """
    existing = Dataset.objects.filter(deployment=deployment).first()
    if existing is not None:
        return existing
    slug = f"production-{deployment.slug}"[:100]
    if Dataset.objects.filter(organization_id=deployment.organization_id, slug=slug).exists():
        slug = f"production-{deployment.slug}"[:90] + f"-{deployment.pk}"
    try:
        with transaction.atomic():
            return Dataset.objects.create(
                organization_id=deployment.organization_id,
                deployment=deployment,
                slug=slug,
                name=f"{deployment.name} — production",
                source=Dataset.Source.PRODUCTION,
                embodiment_id=deployment.embodiment_id,
                description="Interventions at this deployment, recorded by its robots.",
            )
    except IntegrityError:
        return Dataset.objects.get(deployment=deployment)


def failure_record_recording_attach(
    *, record: FailureRecord, recording: Recording, actor: Any = None
) -> tuple[Episode, bool]:
    """Make (once) the record's production episode and link ``recording`` to it; return the
    episode and whether the recording was linked by this call.

    The record's ``recording_ref`` becomes the recording's id. Applying a verdict the
    recording already has is the caller's (``labeling.recording_services.upload_stored``). A
    recording that already belongs to another episode (the same content uploaded for a field
    take) is not taken from it: the episode is then listed without media. Idempotent.
    """
    with transaction.atomic():
        episode = _episode_ensure(record=record, storage_uri="", actor=actor)
        linked = (
            Recording.objects.filter(pk=recording.pk, episode__isnull=True)
            .exclude(segments__isnull=False)
            .update(episode=episode)
        )
        if record.recording_ref != str(recording.pk):
            FailureRecord.objects.filter(pk=record.pk).update(recording_ref=str(recording.pk))
            record.recording_ref = str(recording.pk)
    return episode, bool(linked)


def failure_record_episode_ensure(*, record: FailureRecord, actor: Any = None) -> Episode | None:
    """Give a record whose ``recording_ref`` is a URI its production episode (idempotent).

    The recording stays where the fleet keeps it: the episode is listed with that URI as its
    ``storage_uri`` and no media, and is not validated (it counts as coverage once a
    recording is uploaded for the record, which links it to this same episode). Returns the
    record's episode when it has one already; None when the reference is no URI (nothing
    yet, or an id of a recording not uploaded here).
    """
    existing = Episode.objects.filter(failure_record=record).first()
    if existing is not None:
        return existing
    ref = record.recording_ref.strip()
    if not URI.match(ref):
        return None
    with transaction.atomic():
        return _episode_ensure(record=record, storage_uri=ref, actor=actor)


def production_episodes_sync(*, deployment: Deployment, actor: Any = None) -> int:
    """Give every record of the deployment whose recording is at a URI and that has no
    episode its production episode (records ingested in bulk); return how many were made."""
    # NOT EXISTS with the partial index's condition spelled out, so it is used.
    has_episode = Episode.objects.filter(
        failure_record_id=OuterRef("pk"), failure_record__isnull=False
    )
    records = (
        FailureRecord.objects.filter(deployment=deployment)
        .exclude(recording_ref="")
        .exclude(Exists(has_episode))
        .order_by("pk")
    )
    made = 0
    for record in records.iterator(chunk_size=500):
        if failure_record_episode_ensure(record=record, actor=actor) is not None:
            made += 1
    return made


def _episode_ensure(*, record: FailureRecord, storage_uri: str, actor: Any) -> Episode:
    """The record's episode, made in its deployment's production dataset when it has none.

    Runs inside the caller's transaction; the record is locked so that two replays arriving
    together make one episode (and a retraction deleting it waits)."""
    # Only the record's row: locking its deployment would hold up the ingest's inserts.
    locked = (
        FailureRecord.objects.select_for_update(of=("self",))
        .select_related("deployment")
        .get(pk=record.pk)
    )
    existing = Episode.objects.filter(failure_record=locked).first()
    if existing is not None:
        if storage_uri and not existing.storage_uri:
            Episode.objects.filter(pk=existing.pk).update(storage_uri=storage_uri)
            existing.storage_uri = storage_uri
        return existing
    deployment = locked.deployment
    dataset = production_dataset_ensure(deployment=deployment)
    episode = Episode.objects.create(
        organization_id=locked.organization_id,
        dataset=dataset,
        # The fleet's event id; records entered by hand have none, so their own id.
        key=locked.external_id or f"record-{locked.pk}",
        failure_record=locked,
        embodiment_id=deployment.embodiment_id,
        site_id=deployment.site_id,
        task_id=deployment.task_id,
        condition_set_id=locked.condition_set_id,
        outcome=Episode.Outcome.FAILURE,
        failure_mode_id=locked.failure_mode_id,
        storage_uri=storage_uri,
        provenance=Episode.Provenance.PRODUCTION,
        # Counts as coverage once its recording passes validation, as a field capture does.
        validated=False,
        recorded_at=locked.occurred_at,
        extra={
            "failure_record": locked.pk,
            "event_id": locked.external_id,
            "intervened_by": locked.intervened_by,
            "policy": locked.policy,
        },
    )
    audit_record(
        organization=locked.organization_id,
        actor=actor,
        verb="production_episode_create",
        obj=episode,
        changes={"failure_record": locked.pk, "storage_uri": storage_uri},
    )
    job = LabelJob.objects.filter(dataset=dataset).first()
    if job is not None:
        from labeling.labels.services import label_job_sync_items

        label_job_sync_items(job=job)
    return episode
