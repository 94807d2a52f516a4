"""Which sites can present which condition cells.

A site can present a cell when every condition value of the cell is either present at the
site (its profile) or stageable there (lighting staged with lamps, clutter arranged, camera
pose set; geography or floor cannot be staged).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import combinations

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]


def feasibility_matrix(
    cell_values: Sequence[Collection[int]],
    site_present: Sequence[Collection[int]],
    stageable: Collection[int],
    site_stageable: Mapping[int, Collection[int]] | None = None,
) -> BoolArray:
    """Return a ``(cells, sites)`` boolean matrix: True where the site can present the cell.

    ``site_stageable`` maps a site index to the value ids stageable there, replacing the
    global ``stageable`` set for that site. Runs as one integer matrix product over the
    distinct value ids, so 5,000 cells x 50 sites take milliseconds.
    """
    value_ids = sorted({v for values in cell_values for v in values})
    column = {v: i for i, v in enumerate(value_ids)}
    n_cells, n_sites, n_values = len(cell_values), len(site_present), len(value_ids)
    incidence = np.zeros((n_cells, n_values), dtype=np.int32)
    for c, values in enumerate(cell_values):
        for v in values:
            incidence[c, column[v]] = 1
    overrides = site_stageable or {}
    missing = np.ones((n_values, n_sites), dtype=np.int32)
    for s, present in enumerate(site_present):
        offered = set(present) | set(overrides.get(s, stageable))
        for v in offered:
            i = column.get(v)
            if i is not None:
                missing[i, s] = 0
    # A cell is presentable where it needs no value the site lacks.
    return np.asarray((incidence @ missing) == 0, dtype=np.bool_)


def offering_sites(
    value_ids: Collection[int],
    site_present: Sequence[Collection[int]],
    stageable: Collection[int],
    site_stageable: Mapping[int, Collection[int]] | None = None,
) -> dict[int, frozenset[int]]:
    """Return, per value id, the sites that have it present or can stage it."""
    overrides = site_stageable or {}
    offered = [set(p) | set(overrides.get(s, stageable)) for s, p in enumerate(site_present)]
    return {v: frozenset(s for s, values in enumerate(offered) if v in values) for v in value_ids}


def explain_no_site(
    values: Sequence[int], offering: Mapping[int, frozenset[int]], labels: Mapping[int, str]
) -> str:
    """Say why no site can present a cell, naming as few condition values as possible.

    Prefers a value no site offers at all, then the smallest set of values (up to four,
    rarest first) that no site offers together, and only then every value that is not
    offered everywhere.
    """

    def names(vs: Sequence[int], last: str) -> str:
        quoted = [f"'{labels.get(v, f'value {v}')}'" for v in vs]
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" {last} {quoted[-1]}"

    missing = [v for v in values if not offering.get(v)]
    if missing:
        return "no site can stage " + names(missing, "or")
    everywhere = frozenset().union(*(offering[v] for v in values))
    relevant = sorted(
        (v for v in values if offering[v] != everywhere), key=lambda v: (len(offering[v]), v)
    )
    for size in range(2, min(4, len(relevant)) + 1):
        for combo in combinations(relevant, size):
            if not frozenset.intersection(*(offering[v] for v in combo)):
                return f"no site offers {names(combo, 'and')} together"
    return f"no site offers {names(relevant or list(values), 'and')} together"
