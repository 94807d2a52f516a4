"""The production ledger keyed by (deployment, event id), without database-level foreign keys,
and keeping an intervention's own fields instead of a digest of the body (a replay is the same
event when what the ledger keeps agrees). Existing rows are carried over; interventions take
their fields from their failure records."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

KEPT = (
    "deployment_id, event_id, kind, occurred_at, day, condition_set_id, policy, failed, "
    "duration_seconds, failure_record_id, retracted, received_at"
)


class Migration(migrations.Migration):
    dependencies = [
        ("sites", "0007_production_ingest"),
    ]

    operations = [
        migrations.RunSQL(
            f"CREATE TABLE sites_productionevent_carried AS SELECT {KEPT} FROM sites_productionevent",
            migrations.RunSQL.noop,
        ),
        migrations.DeleteModel(name="ProductionEvent"),
        migrations.CreateModel(
            name="ProductionEvent",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "deployment",
                        "event_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("event_id", models.CharField(max_length=100)),
                (
                    "kind",
                    models.CharField(
                        choices=[("cycle", "Production cycle"), ("intervention", "Intervention")],
                        max_length=12,
                    ),
                ),
                ("occurred_at", models.DateTimeField()),
                ("day", models.DateField(help_text="The site-local day the event counts on.")),
                ("policy", models.SlugField(blank=True, db_index=False, default="", max_length=64)),
                ("failed", models.BooleanField(default=False)),
                ("duration_seconds", models.FloatField(blank=True, null=True)),
                ("intervened_by", models.CharField(blank=True, db_default="", max_length=12)),
                ("note", models.TextField(blank=True, db_default="")),
                ("recording", models.CharField(blank=True, db_default="", max_length=500)),
                ("retracted", models.BooleanField(db_default=False)),
                (
                    "received_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "condition_set",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="sites.conditionset",
                    ),
                ),
                (
                    "deployment",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="sites.deployment",
                    ),
                ),
                (
                    "failure_mode",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="sites.failuremode",
                    ),
                ),
                (
                    "failure_record",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="sites.failurerecord",
                    ),
                ),
            ],
            options={
                "ordering": ["deployment", "occurred_at"],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("failure_record__isnull", False)),
                        fields=("failure_record",),
                        name="production_event_record_unique",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("duration_seconds__isnull", True),
                            ("duration_seconds__gte", 0),
                            _connector="OR",
                        ),
                        name="production_event_duration_nonnegative",
                    ),
                ],
            },
        ),
        migrations.RunSQL(
            f"INSERT INTO sites_productionevent ({KEPT}) SELECT {KEPT} "
            "FROM sites_productionevent_carried; "
            "UPDATE sites_productionevent pe SET failure_mode_id = f.failure_mode_id, "
            "intervened_by = f.intervened_by, note = f.notes, recording = f.recording_ref "
            "FROM sites_failurerecord f WHERE f.id = pe.failure_record_id; "
            "DROP TABLE sites_productionevent_carried",
            migrations.RunSQL.noop,
        ),
    ]
