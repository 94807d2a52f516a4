"""The two big statements of an import: the typing pass and the episode upsert.

Both are built from the mapped columns as SQL (psycopg ``sql`` objects, never string
formatting of values) over the scratch tables named by :class:`StagingTables`, and run by
:class:`labeling.importers.staging.Staging`.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from labeling.importers.cells import Lit, cell, number, prepared, rules_for
from labeling.importers.mapping import MappedColumn
from labeling.importers.rules import INT4_MAX, INT8_MAX, OUTCOMES


class StagingTables:
    """The names of one import's scratch tables, which the statements read and write.

    ``<name>`` holds the raw text rows, ``<name>_typed`` the typed rows, ``<name>_vmap`` the
    distinct raw lookup values, ``<name>_vref`` and ``<name>_cmap`` the ids they stand for.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.typed = f"{name}_typed"
        self.vmap = f"{name}_vmap"
        self.vref = f"{name}_vref"
        self.cmap = f"{name}_cmap"

    def vmap_join(self, index: int, alias: str) -> sql.Composable:
        return sql.SQL("LEFT JOIN {vm} {a} ON {a}.col = {col} AND {a}.raw = p.{c}").format(
            vm=sql.Identifier(self.vmap),
            a=sql.Identifier(alias),
            col=Lit(index),
            c=sql.Identifier(f"c{index}"),
        )


@dataclass
class TypedPlan:
    """How to turn staged text rows into typed episode values (one pass, see ``build_typed``).

    ``lookup_indexes`` are site/embodiment/task columns (their value keys are kept);
    ``condition_indexes`` are condition columns, folded into one combination key per row.
    """

    columns: list[MappedColumn]
    default_fps: float | None
    row_offset: int
    condition_indexes: list[int]
    combination_type: str = "bigint"  # "numeric" when the key would overflow a bigint

    def by_kind(self, kind: str) -> MappedColumn | None:
        for col in self.columns:
            if col.target.kind == kind:
                return col
        return None

    def statement(self, staging: StagingTables) -> sql.Composable:
        """``CREATE TABLE <name>_typed AS SELECT ...``: every staged row cleaned and resolved."""
        by = self.by_kind
        joins: list[sql.Composable] = []
        key = by("key")
        key_expr = (
            cell(key.index)
            if key is not None
            else sql.SQL("('row-' || (p.row_no + {}))").format(Lit(self.row_offset))
        )
        count = by("episode_count")
        cnt_expr = (
            sql.SQL("CASE WHEN {n} >= 1 AND {n} <= {m} THEN ({n})::int END").format(
                n=number(count.index), m=Lit(INT4_MAX)
            )
            if count
            else sql.SQL("1")
        )
        frames = by("frames")
        frames_expr = (
            sql.SQL("CASE WHEN {n} <= {m} THEN ({n})::bigint END").format(
                n=number(frames.index), m=Lit(INT8_MAX)
            )
            if frames
            else sql.SQL("NULL::bigint")
        )
        fps = by("fps")
        fps_expr = (
            sql.SQL("coalesce(CASE WHEN {n} > 0 THEN {n} END, {d}::double precision)").format(
                n=number(fps.index), d=Lit(self.default_fps)
            )
            if fps
            else sql.SQL("{}::double precision").format(Lit(self.default_fps))
        )
        derived = (
            sql.SQL("least({f}, {m})::double precision / nullif({fps}, 0)").format(
                f=number(frames.index), m=Lit(INT8_MAX), fps=fps_expr
            )
            if frames
            else sql.SQL("NULL::double precision")
        )
        duration = by("duration_s")
        duration_expr = (
            sql.SQL("coalesce(CASE WHEN {n} >= 0 THEN {n} END, {d}, 0)").format(
                n=number(duration.index), d=derived
            )
            if duration
            else sql.SQL("coalesce({}, 0)").format(derived)
        )
        outcome = by("outcome")
        outcome_expr: sql.Composable
        if outcome:
            v = sql.SQL("lower({})").format(cell(outcome.index))
            outcome_expr = sql.SQL(
                "CASE WHEN {v} = ANY({s}) THEN 'success' WHEN {v} = ANY({f}) THEN 'failure' "
                "ELSE 'unknown' END"
            ).format(v=v, s=Lit(list(OUTCOMES["success"])), f=Lit(list(OUTCOMES["failure"])))
        else:
            outcome_expr = sql.SQL("'unknown'")
        uri = by("storage_uri")
        uri_expr = sql.SQL("coalesce({}, '')").format(cell(uri.index)) if uri else sql.SQL("''")
        rec = by("recorded_at")
        rec_expr = cell(rec.index) if rec else sql.SQL("NULL::text")

        def status(kind: str) -> sql.Composable:
            col = by(kind)
            return sql.SQL("lower({})").format(cell(col.index)) if col else sql.SQL("NULL::text")

        def json_of(kind: str, numeric: bool) -> sql.Composable:
            cols = [c for c in self.columns if c.target.kind == kind]
            if not cols:
                return sql.SQL("'{}'::jsonb")
            parts = sql.SQL(", ").join(
                sql.SQL("{}, {}").format(
                    Lit(c.target.name), number(c.index) if numeric else cell(c.index)
                )
                for c in cols
            )
            return sql.SQL("jsonb_strip_nulls(jsonb_build_object({}))").format(parts)

        def lookup_key(kind: str) -> sql.Composable:
            col = by(kind)
            if col is None:
                return sql.SQL("NULL::int")
            alias = f"r_{kind}"
            joins.append(staging.vmap_join(col.index, alias))
            return sql.SQL("{}.vkey").format(sql.Identifier(alias))

        site_k, emb_k, task_k = lookup_key("site"), lookup_key("embodiment"), lookup_key("task")
        fm_k = lookup_key("failure_mode")
        if self.condition_indexes:
            terms = []
            for i in self.condition_indexes:
                alias = f"m{i}"
                joins.append(staging.vmap_join(i, alias))
                terms.append(sql.SQL("coalesce({}.term, 0)").format(sql.Identifier(alias)))
            combo_expr: sql.Composable = sql.SQL("({})").format(sql.SQL(" + ").join(terms))
        else:
            combo_expr = sql.SQL("NULL::bigint")
        rules = rules_for(self.columns)
        bad_expr = (
            sql.SQL(" | ").join(
                sql.SQL("(CASE WHEN ({}) IS NOT NULL THEN {} ELSE 0 END)").format(
                    r.code, Lit(1 << i)
                )
                for i, r in enumerate(rules)
            )
            if rules
            else sql.SQL("0")
        )
        return sql.SQL(
            "CREATE UNLOGGED TABLE {typed} WITH (autovacuum_enabled = false) AS "
            "SELECT p.row_no, {key} AS key, {cnt} AS cnt, {frames} AS frames, "
            "{duration} AS duration, {outcome} AS outcome, {uri} AS uri, {rec} AS rec, "
            "{features} AS features, {extra} AS extra, {site} AS site_k, {emb} AS emb_k, "
            "{task} AS task_k, {fm} AS fm_k, {sync} AS sync, {lstat} AS lstat, "
            "{combo} AS combo, {bad} AS bad FROM {p} {joins}"
        ).format(
            typed=sql.Identifier(staging.typed),
            key=key_expr,
            cnt=cnt_expr,
            frames=frames_expr,
            duration=duration_expr,
            outcome=outcome_expr,
            uri=uri_expr,
            rec=rec_expr,
            features=json_of("feature", True),
            extra=json_of("extra", False),
            site=site_k,
            emb=emb_k,
            task=task_k,
            fm=fm_k,
            sync=status("sync_status"),
            lstat=status("label_status"),
            combo=combo_expr,
            bad=bad_expr,
            p=prepared(staging.name, self.columns),
            joins=sql.SQL(" ").join(joins),
        )


@dataclass
class UpsertPlan:
    """What the episode upsert writes: constants, and which typed columns it takes."""

    organization_id: int
    dataset_id: int
    default_site: int | None
    default_embodiment: int | None
    fixed_condition_set: int | None  # only dataset-wide values apply
    has: set[str]  # kinds mapped: outcome, storage_uri, recorded_at, feature, extra, ...
    combinations: bool  # a cmap exists (condition columns mapped)
    update_conditions: bool
    fresh: bool  # the dataset holds no episodes: plain INSERT, no conflict handling

    def statement(self, staging: StagingTables) -> sql.Composable:
        joins: list[sql.Composable] = []

        def ref(column: str, default: int | None) -> sql.Composable | None:
            alias = sql.Identifier(f"ref_{column}")
            joins.append(
                sql.SQL("LEFT JOIN {vr} {a} ON {a}.vkey = t.{c}").format(
                    vr=sql.Identifier(staging.vref), a=alias, c=sql.Identifier(column)
                )
            )
            if default is None:
                return sql.SQL("{}.ref").format(alias)
            return sql.SQL("coalesce({}.ref, {})").format(alias, Lit(default))

        site = (
            ref("site_k", self.default_site)
            if "site" in self.has
            else (Lit(self.default_site) if self.default_site else None)
        )
        emb = (
            ref("emb_k", self.default_embodiment)
            if "embodiment" in self.has
            else (Lit(self.default_embodiment) if self.default_embodiment else None)
        )
        task = ref("task_k", None) if "task" in self.has else None
        mode = ref("fm_k", None) if "failure_mode" in self.has else None
        cs: sql.Composable | None
        if self.combinations:
            joins.append(
                sql.SQL("LEFT JOIN {cm} cm ON cm.combo = t.combo").format(
                    cm=sql.Identifier(staging.cmap)
                )
            )
            cs = sql.SQL("cm.cs")
        elif self.fixed_condition_set is not None:
            cs = Lit(self.fixed_condition_set)
        else:
            cs = None
        insert: list[tuple[str, sql.Composable]] = [
            ("organization_id", Lit(self.organization_id)),
            ("dataset_id", Lit(self.dataset_id)),
            ("key", sql.SQL("t.key")),
            ("episode_count", sql.SQL("coalesce(t.cnt, 1)")),
            ("frames", sql.SQL("coalesce(t.frames, 0)")),
            ("duration_s", sql.SQL("t.duration")),
            ("outcome", sql.SQL("t.outcome")),
            ("storage_uri", sql.SQL("t.uri")),
            ("provenance", sql.SQL("'imported'")),
            ("sync_status", sql.SQL("coalesce(t.sync, 'unknown')")),
            ("label_status", sql.SQL("coalesce(t.lstat, 'unlabelled')")),
            ("validated", sql.SQL("true")),
            ("features", sql.SQL("t.features")),
            ("extra", sql.SQL("t.extra")),
            ("recorded_at", sql.SQL("t.rec::timestamptz")),
            ("created_at", sql.SQL("now()")),
            ("updated_at", sql.SQL("now()")),
            ("site_id", site or sql.SQL("NULL")),
            ("embodiment_id", emb or sql.SQL("NULL")),
            ("task_id", task or sql.SQL("NULL")),
            ("failure_mode_id", mode or sql.SQL("NULL")),
            ("condition_set_id", cs or sql.SQL("NULL")),
        ]
        statement = sql.SQL(
            "INSERT INTO labeling_episode AS e ({cols}) SELECT {vals} FROM {t} t {joins}"
        ).format(
            cols=sql.SQL(", ").join(sql.Identifier(name) for name, _ in insert),
            vals=sql.SQL(", ").join(expr for _, expr in insert),
            t=sql.Identifier(staging.typed),
            joins=sql.SQL(" ").join(joins),
        )
        if self.fresh:
            return statement
        # On conflict, touch only what this import knows; skip rows that would not change.
        updated: list[str] = ["episode_count", "frames", "duration_s"]
        for name, present in (
            ("outcome", "outcome" in self.has),
            ("storage_uri", "storage_uri" in self.has),
            ("recorded_at", "recorded_at" in self.has),
            ("site_id", site is not None),
            ("embodiment_id", emb is not None),
            ("task_id", task is not None),
            ("failure_mode_id", mode is not None),
            ("sync_status", "sync_status" in self.has),
            ("label_status", "label_status" in self.has),
            ("condition_set_id", self.update_conditions),
        ):
            if present:
                updated.append(name)
        sets: list[sql.Composable] = [
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updated
        ]
        changed: list[sql.Composable] = [
            sql.SQL("e.{0} IS DISTINCT FROM EXCLUDED.{0}").format(sql.Identifier(c))
            for c in updated
        ]
        for name in ("feature", "extra"):
            if name in self.has:
                column = sql.Identifier("features" if name == "feature" else "extra")
                sets.append(sql.SQL("{0} = e.{0} || EXCLUDED.{0}").format(column))
                changed.append(sql.SQL("NOT (e.{0} @> EXCLUDED.{0})").format(column))
        sets.append(sql.SQL("updated_at = now()"))
        return sql.SQL("{} ON CONFLICT (dataset_id, key) DO UPDATE SET {} WHERE {}").format(
            statement, sql.SQL(", ").join(sets), sql.SQL(" OR ").join(changed)
        )
