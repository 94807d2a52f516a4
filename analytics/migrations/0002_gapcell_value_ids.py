import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("analytics", "0001_initial")]

    operations = [
        migrations.RemoveConstraint(model_name="gapcell", name="gap_cell_unique"),
        migrations.RemoveField(model_name="gapcell", name="condition_set"),
        migrations.AddField(
            model_name="gapcell",
            name="value_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.IntegerField(), default=list, size=None
            ),
            preserve_default=False,
        ),
    ]
