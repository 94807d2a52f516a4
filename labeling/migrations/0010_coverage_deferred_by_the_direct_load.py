"""The direct load adds its own coverage counts, once, instead of the insert trigger's per
statement.

A direct load is a series of binary ``COPY`` statements (restarted as new condition sets
are interned), and the insert trigger of 0008 aggregated and upserted each statement's
rows: on a manifest of 1,000,000 rows with ~15,000 condition sets that upserted tens of
thousands of keys a dozen times and made the load 1.6 times as long
(``bench/import_inventory.py``: 11.8 s before 0008, 19.0 s after). The loader knows what it writes: it sums its countable rows per
key as it types them and upserts that once, in the trigger's lock order
(:func:`labeling.coverage.coverage_settle`), having set ``fieldcraft.coverage`` to
``deferred`` for its own statements only (``set_config(..., true)``: until its transaction
or savepoint ends, or it sets it back). Every other writer still goes through the trigger.
"""

from django.db import migrations

FORWARD = """
DROP TRIGGER labeling_episode_coverage_insert ON labeling_episode;
CREATE TRIGGER labeling_episode_coverage_insert AFTER INSERT ON labeling_episode
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT
    WHEN (COALESCE(current_setting('fieldcraft.coverage', true), '') <> 'deferred')
    EXECUTE FUNCTION labeling_episode_coverage_insert();
"""

BACKWARD = """
DROP TRIGGER labeling_episode_coverage_insert ON labeling_episode;
CREATE TRIGGER labeling_episode_coverage_insert AFTER INSERT ON labeling_episode
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION labeling_episode_coverage_insert();
"""


class Migration(migrations.Migration):
    dependencies = [("labeling", "0009_production_episodes")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
