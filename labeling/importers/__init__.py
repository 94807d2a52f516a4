"""Inventory importers: LeRobot datasets and tabular manifests (CSV, TSV, Parquet).

* ``runner`` — one import end to end (stage → check → write), called by
  :func:`labeling.services.inventory_import_run`;
* ``sources`` — reading files: format detection, UTF-8 checks, record-aligned chunks,
  Parquet batches, archives, JSON Lines;
* ``lerobot`` and ``lerobot_features`` — a LeRobot dataset's metadata in its three layouts;
* ``mapping`` — which column feeds which episode field or condition;
* ``staging``, ``cells``, ``statements`` — the set-based SQL (COPY, typing pass, upsert);
* ``resolve`` and ``writes`` — lookups against the taxonomy, and what the write phase creates;
* ``errors`` — :class:`ImportProblem` (file, row, column, message) and :class:`ImportFailed`.
"""
