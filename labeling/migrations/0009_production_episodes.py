"""Production episodes: a deployment's production dataset, and the intervention an episode records.

``Episode.failure_record`` carries no foreign key constraint (a COPY of a million episodes
would check it row by row); instead a statement-level trigger on ``sites_failurerecord``
unsets it when records go, including the production ingest's retractions, which delete
records in SQL where Django's ``SET_NULL`` never runs. The partial unique index serves the
trigger's lookup (and says: one episode per record).
"""

import django.db.models.deletion
from django.db import migrations, models


TRIGGER_SQL = """
CREATE FUNCTION labeling_failure_record_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE labeling_episode SET failure_record_id = NULL
    WHERE failure_record_id IS NOT NULL AND failure_record_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
CREATE TRIGGER labeling_failure_record_gone AFTER DELETE ON sites_failurerecord
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION labeling_failure_record_gone();
"""

REVERSE_SQL = """
DROP TRIGGER IF EXISTS labeling_failure_record_gone ON sites_failurerecord;
DROP FUNCTION IF EXISTS labeling_failure_record_gone();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('labeling', '0008_coverage_count'),
        ('sites', '0007_production_ingest'),
    ]

    operations = [
        migrations.AddField(
            model_name='dataset',
            name='deployment',
            field=models.OneToOneField(blank=True, help_text='The deployment whose interventions this dataset holds (production datasets).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='production_dataset', to='sites.deployment'),
        ),
        migrations.AddField(
            model_name='episode',
            name='failure_record',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='episodes', to='sites.failurerecord'),
        ),
        migrations.AlterField(
            model_name='dataset',
            name='source',
            field=models.CharField(choices=[('imported', 'Imported inventory'), ('captured', 'Captured in a collection round'), ('exported', 'Export target'), ('production', 'Interventions recorded in production')], default='imported', max_length=16),
        ),
        migrations.AlterField(
            model_name='episode',
            name='provenance',
            field=models.CharField(choices=[('imported', 'Imported'), ('captured', 'Captured by a collection task'), ('production', 'Recorded by a deployed robot (an intervention)')], db_default='imported', default='imported', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='episode',
            constraint=models.UniqueConstraint(condition=models.Q(('failure_record__isnull', False)), fields=('failure_record',), name='episode_failure_record_unique'),
        ),
        migrations.RunSQL(TRIGGER_SQL, REVERSE_SQL),
    ]
