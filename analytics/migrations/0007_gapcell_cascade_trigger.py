"""Cells go with their report in the database too.

Since 0006 a cell has no foreign key to its report (its per-row check cost a fifth of storing
a report). Django deletes a report's cells before the report, but cells a concurrent store
commits in between would outlive it; this trigger deletes them with the report row, in a
statement that sees what has committed by then.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION analytics_gapreport_delete_cells() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM analytics_gapcell WHERE report_id = OLD.id;
    RETURN OLD;
END
$$;
CREATE TRIGGER analytics_gapreport_delete_cells AFTER DELETE ON analytics_gapreport
    FOR EACH ROW EXECUTE FUNCTION analytics_gapreport_delete_cells();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS analytics_gapreport_delete_cells ON analytics_gapreport;
DROP FUNCTION IF EXISTS analytics_gapreport_delete_cells();
"""


class Migration(migrations.Migration):
    dependencies = [("analytics", "0006_gapcell_report_no_db_constraint")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
