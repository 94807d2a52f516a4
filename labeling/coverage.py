"""A writer that counts its own coverage: the direct load (migration 0010).

``labeling_coveragecount`` is kept by statement-level triggers on ``labeling_episode``
(migration 0008). A writer issuing many statements over one set of keys can instead sum its
countable rows per key itself and add them once: :func:`coverage_defer` turns the insert
trigger off for its own statements (its session's setting, until its transaction or
savepoint ends), and :func:`coverage_settle` adds the sums, in the trigger's lock order, and
turns it back on. Every other writer, and this one's other statements, go through the
trigger as before.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

COVERAGE_SETTING = "fieldcraft.coverage"
"""Set to ``deferred`` (transaction-local) while a writer counts its own inserts."""

DELTA_COLUMNS = ("embodiment_id", "task_id", "condition_set_id", "episodes", "rows")
"""A delta's columns: the key within one dataset, then the countable episodes and rows."""


def coverage_defer(cursor: Any) -> None:
    """Skip the insert trigger for this session's statements until :func:`coverage_settle`
    (or the end of the transaction or savepoint: a rollback undoes it with the rows)."""
    cursor.execute("SELECT set_config(%s, 'deferred', true)", [COVERAGE_SETTING])


def coverage_settle(cursor: Any, *, organization_id: int, dataset_id: int, delta: pa.Table) -> None:
    """Add ``delta`` (:data:`DELTA_COLUMNS`, one row per key: the countable rows the
    deferred statements inserted into ``dataset_id``) to the counts, keys in the trigger's
    lock order so that two writers wait for each other instead of deadlocking; then let
    the trigger count again."""
    if delta.num_rows:
        cursor.execute(
            """
            INSERT INTO labeling_coveragecount AS c
                (organization_id, dataset_id, embodiment_id, task_id, condition_set_id,
                 episodes, rows)
            SELECT %s, %s, e, t, s, n, r
            FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])
                AS d(e, t, s, n, r)
            ORDER BY t, e, s
            ON CONFLICT ON CONSTRAINT coverage_count_key DO UPDATE
                SET episodes = c.episodes + EXCLUDED.episodes, rows = c.rows + EXCLUDED.rows
            """,
            [organization_id, dataset_id, *(_array_text(delta[c]) for c in DELTA_COLUMNS)],
        )
    cursor.execute("SELECT set_config(%s, '', true)", [COVERAGE_SETTING])


def _array_text(values: pa.ChunkedArray) -> str:
    """A PostgreSQL array literal of integers, joined by pyarrow: a million-row load's
    hundred thousand keys go as five strings, not as numbers adapted one at a time."""
    text = pc.fill_null(pc.cast(values.combine_chunks(), pa.string()), "NULL")
    offsets = pa.array([0, len(text)], pa.int32())
    return "{" + pc.binary_join(pa.ListArray.from_arrays(offsets, text), ",")[0].as_py() + "}"
