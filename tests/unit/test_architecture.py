"""The import rules of docs/architecture.md, read from the source with ``ast`` (nothing is imported).

Every ``import`` statement under ``regress/`` counts, at module level or inside a function (a lazy
import is still a dependency), except those under ``if TYPE_CHECKING:``. A ``from a.b import c``
depends on ``a.b.c`` when that is a module, else on ``a.b``; a module's own parent packages are
not counted (Python runs their ``__init__`` first, which is how packages work, not a cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "regress"

#: What ``regress.bisect`` may import from the rest of regress (the ground modules): it is generic, like
#: mozregression's bisector; domain probes and recipes are plug-ins found through entry points.
BISECT_MAY_IMPORT = {
    "regress.errors",
    "regress.files",
    "regress.guardian",
    "regress.plugins",
    "regress.processes",
    "regress.progress",
}
#: Entry points allowed to import the CLI.
CLI_IMPORTERS = {"regress.__main__"}
#: ``regress check``'s packages, lowest first: each imports only the ones before it.
CHECK_LAYERS = ("regress.tree", "regress.sandbox", "regress.check")
#: Packages a CI runner without the torch extra runs (``regress trend``, ``regress bisect``).
NO_ARRAY_LIBRARY = ("regress.trend", "regress.bisect")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The regress modules (and third-party top-level names) ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            out.add(sub if sub in modules else target)
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return out - parents - {name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _component(module: str) -> str:
    """``regress.bisect.store`` -> ``regress.bisect``; top-level modules are their own."""
    return ".".join(module.split(".")[:2])


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
                continue
            if child not in edges:
                continue
            if child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _internal(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: {i for i in imps if i in graph} for m, imps in graph.items()}


def test_no_module_import_cycle(graph):
    assert _cycles(_internal(graph)) == []


def test_no_package_import_cycle(graph):
    packages: dict[str, set[str]] = {}
    for module, imports in _internal(graph).items():
        edges = packages.setdefault(_component(module), set())
        edges.update(_component(i) for i in imports if _component(i) != _component(module))
    assert _cycles(packages) == []


def test_bisect_imports_no_domain_package(graph):
    broken = {
        module: sorted(
            i
            for i in imports
            if i.startswith("regress")
            and _component(i) != "regress.bisect"
            and i not in BISECT_MAY_IMPORT
        )
        for module, imports in graph.items()
        if _component(module) == "regress.bisect"
    }
    assert {m: i for m, i in broken.items() if i} == {}


def test_no_library_module_imports_click(graph):
    library = {
        m: imps for m, imps in graph.items() if _component(m) != "regress.cli" and m != "regress"
    }
    assert (
        sorted(m for m, imps in library.items() if any(i.split(".")[0] == "click" for i in imps))
        == []
    )


def test_nothing_imports_the_cli(graph):
    importers = sorted(
        m
        for m, imports in graph.items()
        if _component(m) != "regress.cli"
        and m not in CLI_IMPORTERS
        and any(_component(i) == "regress.cli" for i in imports)
    )
    assert importers == []


def test_tree_sandbox_and_check_import_only_downwards(graph):
    upward = {
        module: sorted(i for i in imports if _component(i) in CHECK_LAYERS[k + 1 :])
        for k, layer in enumerate(CHECK_LAYERS)
        for module, imports in graph.items()
        if _component(module) == layer
    }
    assert {m: i for m, i in upward.items() if i} == {}


def _library_sources() -> Iterator[tuple[str, ast.Module]]:
    for name, path in _modules().items():
        if _component(name) != "regress.cli" and name not in CLI_IMPORTERS:
            yield name, ast.parse(path.read_text(encoding="utf-8"))


def test_no_library_module_has_a_main_or_prints():
    found = []
    for name, tree in _library_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                found.append(f"{name}: def main")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                found.append(f"{name}:{node.lineno}: print()")
    assert found == []


#: The library modules that start a child process by naming ``regress.cli.child`` (the only CLI
#: module a library module may name, and only in a string): an import rule cannot see a
#: ``python -m`` string, so this list makes the dependency visible and keeps it from spreading.
CLI_BY_NAME = {"regress.check.recipes", "regress.trtllm.layerwise"}


def test_only_the_listed_modules_start_a_cli_module_by_name():
    found = {}
    for name, tree in _library_sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("regress.cli.")
            ):
                found.setdefault(name, set()).add(node.value)
    assert {n: sorted(v) for n, v in found.items() if n not in CLI_BY_NAME} == {}
    assert all(v == {"regress.cli.child"} for n, v in found.items()), found


def test_trend_and_bisect_import_no_array_library(graph):
    # not even lazily: the nightly trend check and a bisect run where torch is not installed
    heavy = {
        module: sorted(i for i in imports if i.split(".")[0] in ("torch", "numpy"))
        for module, imports in graph.items()
        if _component(module) in NO_ARRAY_LIBRARY
    }
    assert {m: i for m, i in heavy.items() if i} == {}
