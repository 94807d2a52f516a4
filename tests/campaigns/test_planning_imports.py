"""The planning cores import one another without cycles and never import Django.

Pure Python: parses ``campaigns/planning/*.py`` with ``ast``, counting every import, also
those inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = "campaigns.planning"
PLANNING = Path(__file__).resolve().parents[2] / "campaigns" / "planning"


def module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, str]]:
    """Yield (module, name) for every import; name is empty for ``import module``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                source = ".".join([*parts, node.module] if node.module else parts)
            yield from ((source, alias.name) for alias in node.names)


def planning_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Return (planning module -> planning modules it imports, module -> modules it imports)."""
    files = {module_name(p): p for p in sorted(PLANNING.glob("*.py"))}
    graph: dict[str, set[str]] = {}
    imported: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = list(imports(tree, module, path.stem == "__init__"))
        imported[module] = {source for source, _ in found}
        # ``from campaigns.planning import x`` imports module x when there is one.
        targets = {f"{s}.{n}" if f"{s}.{n}" in files else s for s, n in found}
        graph[module] = {t for t in targets if t in files and t != module}
    return graph, imported


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """Return one import cycle as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_cycle_finder_reports_a_cycle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_planning_modules_import_each_other_without_cycles() -> None:
    graph, _ = planning_graph()

    cycle = find_cycle(graph)

    # The walk must see imports inside functions and under TYPE_CHECKING, not only the top.
    assert f"{PACKAGE}.schedule_locks" in graph[f"{PACKAGE}.scheduling"]
    assert f"{PACKAGE}.allocation_types" in graph[f"{PACKAGE}.allocation_report"]
    assert cycle is None, "import cycle among planning modules: " + " -> ".join(cycle or [])


def test_no_planning_module_imports_django() -> None:
    _, imported = planning_graph()

    offenders = sorted(
        f"{module} imports {name}"
        for module, names in imported.items()
        for name in names
        if name.split(".")[0] == "django"
    )

    assert offenders == []
