"""The import contracts in pyproject.toml hold, and each of them catches the import it forbids.

The same contracts run in ``make lint`` (``lint-imports``); here they run through
import-linter's Python API on a graph built once, so ``make test`` checks them too. Imports
inside functions and under ``TYPE_CHECKING`` count.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
CONTRACT_TYPES: dict[str, type[Contract]] = {
    "layers": LayersContract,
    "forbidden": ForbiddenContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}
# One import each contract must refuse: (contract type, importer, imported).
VIOLATIONS = [
    ("layers", "accounts.models", "frontend.views"),
    ("layers", "labeling.services", "config.celery"),
    ("forbidden", "campaigns.planning.gain", "django"),
    ("forbidden", "analytics.gap.core", "analytics.models"),
    ("forbidden", "labeling.capture.align", "labeling.services"),
    ("acyclic_siblings", "labeling.models", "labeling.services"),
    ("acyclic_siblings", "analytics.services.gap_inputs", "analytics.services.gap"),
]


@pytest.fixture(scope="module")
def options() -> dict[str, Any]:
    return read_configuration(str(PYPROJECT))


@pytest.fixture(scope="module")
def graph(options: dict[str, Any]) -> grimp.ImportGraph:
    return grimp.build_graph(
        *options["session_options"]["root_packages"],
        include_external_packages=True,
        cache_dir=None,
    )


def contracts(options: dict[str, Any], kind: str | None = None) -> list[Contract]:
    return [
        CONTRACT_TYPES[c["type"]](
            name=c["name"], session_options=options["session_options"], contract_options=c
        )
        for c in options["contracts_options"]
        if kind is None or c["type"] == kind
    ]


def test_every_contract_in_pyproject_is_of_a_type_this_test_knows(options: dict[str, Any]) -> None:
    kinds = {c["type"] for c in options["contracts_options"]}

    assert kinds == set(CONTRACT_TYPES)


def test_the_codebase_keeps_every_import_contract(
    options: dict[str, Any], graph: grimp.ImportGraph
) -> None:
    broken = {}
    for contract in contracts(options):
        # A contract may change the graph it checks: each gets its own copy.
        check = contract.check(copy.deepcopy(graph), verbose=False)
        if not check.kept:
            broken[contract.name] = check.metadata

    assert broken == {}, f"run `lint-imports` to see the imports that break them: {broken}"


@pytest.mark.parametrize(("kind", "importer", "imported"), VIOLATIONS)
def test_a_contract_refuses_the_import_it_forbids(
    options: dict[str, Any], graph: grimp.ImportGraph, kind: str, importer: str, imported: str
) -> None:
    broken_graph = copy.deepcopy(graph)
    broken_graph.add_import(
        importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}"
    )

    kept = [
        c.check(copy.deepcopy(broken_graph), verbose=False).kept for c in contracts(options, kind)
    ]

    assert kept and not all(kept)
