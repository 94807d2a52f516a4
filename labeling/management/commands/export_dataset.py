"""export_dataset: write a dataset's synchronised, accepted episodes in a training format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q
from django.utils.text import slugify

from accounts.models import Organization
from labeling.exports.services import FORMATS, ExportError, dataset_export_write, exclusion_lines
from labeling.models import Dataset


class Command(BaseCommand):
    help = (
        "Export a dataset in the form models train on: LeRobot v3.0 or v2.1 (data files and "
        "video converted from the episodes' recordings, else metadata only; Fieldcraft's "
        "conditions, outcome and failure mode as per-episode fields) or a "
        "Parquet/CSV manifest. Only synchronised, accepted episodes export; the rest are "
        "counted with their reasons. Exits 1 when nothing qualifies."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("outdir", help="folder to write the export into (created if needed)")
        parser.add_argument("--dataset", required=True, help="dataset name or slug")
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument(
            "--organization", help="operator organization slug (default: the only one)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dataset = self._dataset(options["dataset"], options.get("organization"))
        outdir = Path(options["outdir"])
        try:
            summary = dataset_export_write(
                dataset=dataset, format=options["format"], outdir=outdir
            ).as_dict()
        except ExportError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Exported {summary['rows']:,} episodes ({summary['frames']:,} frames, "
            f"{summary['tasks']} task{'s' if summary['tasks'] != 1 else ''}) of {dataset.name} "
            f"as {options['format']} to {outdir}: {_files(summary['files'])}"
        )
        conversion = summary.get("conversion")
        if conversion:
            self.stdout.write(
                f"  with data files and video: {conversion['recordings_converted']:,} "
                f"recordings converted, {conversion['recordings_reused']:,} reused"
            )
            for why, n in conversion["left_out"].items():
                self.stdout.write(f"  not in the dataset, {why}: {n:,}")
            if conversion["left_out_total"]:
                self.stdout.write(f"    each named in {outdir / conversion['left_out_file']}")
        elif summary.get("metadata_only"):
            self.stdout.write("  metadata only: no exported episode has a recording")
        lines = exclusion_lines(summary)
        if lines:
            excluded = summary["excluded"]["excluded_rows"]
            self.stdout.write(f"  left out: {excluded:,} episode rows")
            for line in lines:
                self.stdout.write(f"    {line}")

    def _dataset(self, name: str, organization: str | None) -> Dataset:
        qs = Dataset.objects.filter(organization__kind=Organization.Kind.OPERATOR)
        if organization:
            qs = qs.filter(organization__slug=organization)
        found = list(qs.filter(Q(slug=name) | Q(slug=slugify(name)) | Q(name__iexact=name))[:2])
        if not found:
            raise CommandError(
                f"No dataset {name!r}" + (f" in {organization}" if organization else "") + "."
            )
        if len(found) > 1:
            raise CommandError(f"Several datasets are called {name!r}; give --organization SLUG.")
        return found[0]


def _files(files: list[str]) -> str:
    if len(files) <= 6:
        return ", ".join(files)
    return ", ".join(files[:5]) + f" and {len(files) - 5:,} more"
