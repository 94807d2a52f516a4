"""Coverage counts maintained by the database as episodes arrive, change and go.

A gap report used to GROUP BY every episode of the organization (1.4 s at 3M episodes,
growing linearly). ``labeling_coveragecount`` holds the same sums per (organization, dataset,
embodiment, task, condition set), kept current by statement-level AFTER triggers on
``labeling_episode`` that read the statement's transition tables: one aggregated delta per
statement (a 1,000,000-row COPY is one upsert of a few thousand keys), for every writer
without touching any of them. Keys are upserted in one sorted order, so two statements
adding to the same keys wait for each other instead of deadlocking. A key whose rows reach
zero is deleted. TRUNCATE empties the counts too. The backfill runs after the triggers
exist: CREATE TRIGGER locks out writers until this migration commits, so nothing is missed.
"""

import django.db.models.deletion
from django.db import migrations, models

KEY = "organization_id, dataset_id, embodiment_id, task_id, condition_set_id"
# The unique key's column order: upserts lock rows in it (and NULLs last, as ORDER BY does).
LOCK_ORDER = "organization_id, task_id, embodiment_id, condition_set_id, dataset_id"
COUNTABLE = "validated AND label_status <> 'rejected' AND condition_set_id IS NOT NULL"


def _apply(source: str) -> str:
    """PL/pgSQL that upserts the delta of ``source`` (key, episodes, n rows) and drops zeros."""
    return f"""
    WITH delta AS (
        SELECT {KEY}, SUM(episodes) AS episodes, SUM(n) AS n
        FROM ({source}) s
        GROUP BY {KEY}
        HAVING SUM(n) <> 0 OR SUM(episodes) <> 0
    ), up AS (
        INSERT INTO labeling_coveragecount AS c ({KEY}, episodes, rows)
        SELECT {KEY}, episodes, n FROM delta ORDER BY {LOCK_ORDER}
        ON CONFLICT ON CONSTRAINT coverage_count_key DO UPDATE
            SET episodes = c.episodes + EXCLUDED.episodes, rows = c.rows + EXCLUDED.rows
        RETURNING c.id, c.rows
    )
    SELECT array_agg(id) FILTER (WHERE rows = 0) INTO zeroed FROM up;
    IF zeroed IS NOT NULL THEN
        DELETE FROM labeling_coveragecount WHERE id = ANY(zeroed) AND rows = 0;
    END IF;
    """


def _rows(table: str, sign: str) -> str:
    return f"SELECT {KEY}, {sign}episode_count AS episodes, {sign}1 AS n FROM {table} WHERE {COUNTABLE}"


def _function(name: str, source: str) -> str:
    return f"""
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    zeroed bigint[];
BEGIN
    {_apply(source)}
    RETURN NULL;
END
$$;
"""


FORWARD = (
    _function("labeling_episode_coverage_insert", _rows("new_rows", ""))
    + _function("labeling_episode_coverage_delete", _rows("old_rows", "-"))
    + _function(
        "labeling_episode_coverage_update",
        _rows("new_rows", "") + " UNION ALL " + _rows("old_rows", "-"),
    )
    + """
CREATE FUNCTION labeling_episode_coverage_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM labeling_coveragecount;
    RETURN NULL;
END
$$;
CREATE TRIGGER labeling_episode_coverage_insert AFTER INSERT ON labeling_episode
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION labeling_episode_coverage_insert();
CREATE TRIGGER labeling_episode_coverage_delete AFTER DELETE ON labeling_episode
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION labeling_episode_coverage_delete();
CREATE TRIGGER labeling_episode_coverage_update AFTER UPDATE ON labeling_episode
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION labeling_episode_coverage_update();
CREATE TRIGGER labeling_episode_coverage_truncate AFTER TRUNCATE ON labeling_episode
    FOR EACH STATEMENT EXECUTE FUNCTION labeling_episode_coverage_truncate();
"""
    + f"""
INSERT INTO labeling_coveragecount ({KEY}, episodes, rows)
SELECT {KEY}, SUM(episode_count), COUNT(*) FROM labeling_episode WHERE {COUNTABLE}
GROUP BY {KEY};
"""
)

BACKWARD = """
DROP TRIGGER IF EXISTS labeling_episode_coverage_insert ON labeling_episode;
DROP TRIGGER IF EXISTS labeling_episode_coverage_delete ON labeling_episode;
DROP TRIGGER IF EXISTS labeling_episode_coverage_update ON labeling_episode;
DROP TRIGGER IF EXISTS labeling_episode_coverage_truncate ON labeling_episode;
DROP FUNCTION IF EXISTS labeling_episode_coverage_insert();
DROP FUNCTION IF EXISTS labeling_episode_coverage_delete();
DROP FUNCTION IF EXISTS labeling_episode_coverage_update();
DROP FUNCTION IF EXISTS labeling_episode_coverage_truncate();
"""


class Migration(migrations.Migration):
    # The sites migration that already holds every model referenced here (not the latest).
    dependencies = [
        ('accounts', '0001_initial'),
        ('labeling', '0007_recording_segments'),
        ('sites', '0003_condition_sample'),
    ]

    operations = [
        migrations.CreateModel(
            name='CoverageCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('episodes', models.BigIntegerField(help_text='SUM(episode_count) of the countable rows.')),
                ('rows', models.BigIntegerField(help_text='Countable episode rows; the row goes at zero.')),
                ('condition_set', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='sites.conditionset')),
                ('dataset', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='labeling.dataset')),
                ('embodiment', models.ForeignKey(db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='sites.embodiment')),
                ('organization', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='accounts.organization')),
                ('task', models.ForeignKey(db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='sites.task')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('organization', 'task', 'embodiment', 'condition_set', 'dataset'), name='coverage_count_key', nulls_distinct=False)],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
