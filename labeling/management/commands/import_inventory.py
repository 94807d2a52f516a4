"""import_inventory: import a LeRobot dataset or a CSV/TSV/Parquet manifest into a dataset."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.commands import operator_organization
from accounts.models import Job
from labeling.importers.errors import ImportFailed
from labeling.importers.sources import FORMATS
from labeling.services import inventory_import_run, inventory_import_start


class Command(BaseCommand):
    help = (
        "Import a training-data inventory: a LeRobot dataset (folder or .zip/.tar.gz; v2.0, "
        "v2.1, v3.0) or a manifest (CSV, TSV, Parquet). Importing the same dataset again "
        "updates its episodes. Exits 1 with the problems when the input is bad; nothing is "
        "written then."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="LeRobot dataset folder or archive, or a manifest file")
        parser.add_argument("--dataset", required=True, help="dataset name (created if new)")
        parser.add_argument("--format", choices=FORMATS, help="default: detected")
        parser.add_argument(
            "--organization", help="operator organization slug (default: the only one)"
        )
        parser.add_argument("--embodiment", help="embodiment slug or name for every episode")
        parser.add_argument("--site", help="site slug or name for every episode")
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="COLUMN=TARGET",
            help="map a column to key, count, frames, duration_s, fps, outcome, task, site, "
            "embodiment, storage_uri, recorded_at, feature:NAME, extra:NAME, ignore or a "
            "condition dimension (repeatable)",
        )
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="DIMENSION=VALUE",
            help="a condition value for every episode; values in the data win (repeatable)",
        )
        parser.add_argument(
            "--create-values",
            action="store_true",
            help="create unknown condition values instead of failing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        organization = operator_organization(options.get("organization"))
        try:
            record = inventory_import_start(
                organization=organization,
                dataset_name=options["dataset"],
                path=options["path"],
                format=options.get("format"),
                mapping=options["map"],
                sets=options["set"],
                create_values=options["create_values"],
                embodiment=options.get("embodiment"),
                site=options.get("site"),
                enqueue=False,
            )
        except ImportFailed as exc:
            raise CommandError(
                _problems_text(exc.summary(), [str(p) for p in exc.problems])
            ) from None
        self.stderr.write(
            f"Importing {record.source_name} ({record.format}) into {record.dataset_name} …"
        )
        inventory_import_run(job_id=str(record.job_id))
        record.refresh_from_db()
        job = record.job
        job.refresh_from_db()
        if job.status != Job.Status.SUCCEEDED:
            problems = [e.get("text") or e.get("message", "") for e in job.errors]
            raise CommandError(_problems_text(job.message or job.status, problems))
        self.stdout.write(format_summary(record.summary))


def _problems_text(head: str, problems: list[str]) -> str:
    lines = [f"Import failed: {head}"] if len(problems) != 1 else ["Import failed:"]
    lines += [f"  - {p}" for p in problems]
    return "\n".join(lines)


def format_summary(summary: dict[str, Any]) -> str:
    """The summary a person reads after an import (also used by the bench)."""
    ds = summary.get("dataset", {})
    lines = [
        f"Imported into {ds.get('name')} ({summary.get('format_version')}): "
        f"{summary.get('episodes', 0):,} episodes, {summary.get('frames', 0):,} frames "
        f"in {summary.get('rows', 0):,} row{'' if summary.get('rows') == 1 else 's'} "
        f"({summary.get('seconds', 0)} s).",
        f"  rows: {summary.get('inserted', 0):,} new, {summary.get('updated', 0):,} updated, "
        f"{summary.get('unchanged', 0):,} unchanged"
        + (f", {summary['removed']:,} removed" if summary.get("removed") else ""),
    ]
    conditions = [c for c in summary.get("conditions", []) if c.get("values")]
    if conditions:
        lines.append("  episodes per condition value (whole dataset):")
        for dim in conditions:
            values = ", ".join(f"{v['value']} {v['episodes']:,}" for v in dim["values"])
            if dim.get("not_recorded"):
                values += f", not recorded {dim['not_recorded']:,}"
            lines.append(f"    {dim['dimension']}: {values}")
    sites = [s for s in summary.get("sites", []) if s.get("site") != "(no site)"]
    if sites:
        lines.append(
            "  episodes per site: " + ", ".join(f"{s['site']} {s['episodes']:,}" for s in sites)
        )
    for key, value in (summary.get("created") or {}).items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        lines.append(f"  created {key.replace('_', ' ')}: {shown}")
    if summary.get("ignored_columns"):
        lines.append(
            "  ignored columns: " + ", ".join(c[:40] for c in summary["ignored_columns"][:20])
        )
    for warning in summary.get("warnings", []):
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)
