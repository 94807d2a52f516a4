"""A staged import checks and writes its rows in single statements that count nothing: it
says how long they will take at the pace of its organization's earlier staged imports."""

from __future__ import annotations

import pytest

from accounts.models import Job
from accounts.services import JobContext
from frontend.templatetags.jobs import job_time
from labeling.selectors import staged_import_pace
from tests.labeling.imports import run


def _ratios(phases):
    writing = phases["upsert"] + phases["write"] + phases["commit"]
    return (phases["check"] + writing) / phases["stage"], writing / phases["stage"]


def test_a_staged_import_expects_its_end_at_the_pace_of_the_ones_before(
    world_a, world_b, tmp_path, monkeypatch
):
    told: list[tuple[float, str]] = []
    expect = JobContext.expect

    def recording(self, seconds):  # the real call, and what the job's bar then says
        expect(self, seconds)
        told.append((seconds, job_time(Job.objects.get(pk=self.job.pk))))

    monkeypatch.setattr(JobContext, "expect", recording)
    path = tmp_path / "m.csv"
    rows = "".join(f"k{i},{1 + i % 3}\n" for i in range(3_000))
    path.write_text("key,count\n" + rows, encoding="utf-8")
    first = run(world_a, path, "Thrice")
    assert first.summary["path"]["direct"] is True
    assert staged_import_pace(organization_id=world_a.operator.pk) is None  # direct: no phases

    path.write_text("key,count\n" + rows + "z,1\n", encoding="utf-8")
    second = run(world_a, path, "Thrice")
    assert second.summary["path"]["direct"] is False
    assert told == []  # the first staged import has nothing to go by
    assert second.job.expected_end_at is None

    pace = staged_import_pace(organization_id=world_a.operator.pk)
    assert pace is not None and pace.imports == 1
    after_staging, after_checking = _ratios(second.summary["phases"])
    assert (pace.after_staging, pace.after_checking) == pytest.approx(
        (after_staging, after_checking)
    )
    assert staged_import_pace(organization_id=world_b.operator.pk) is None  # not another's

    path.write_text("key,count\n" + rows + "z,2\n", encoding="utf-8")
    third = run(world_a, path, "Thrice")
    assert third.summary["path"]["direct"] is False
    stage = third.summary["phases"]["stage"]  # rounded to the millisecond when stored
    assert [s for s, _ in told] == pytest.approx(
        [stage * after_staging, stage * after_checking], rel=0.05, abs=0.01
    )
    assert told[0][0] > told[1][0]  # the checking was still ahead at the first
    for _, said in told:  # the bar says the time left, at once
        assert " so far · " in said and said.endswith((" left", "· finishing"))
