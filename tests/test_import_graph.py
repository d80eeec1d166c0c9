"""No import cycles in `src/aiayn`: the import graph of the package, read from its source with ``ast``.

Every ``import`` counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (they never run). ``from pkg import name`` is an edge to the submodule
``pkg.name`` when ``name`` is a submodule, otherwise to ``pkg`` itself. Importing a submodule is
not counted as importing its parent packages: only what a module names is an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Map every module name under ``root`` (the package directory) to its file."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join([package, *parts])] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    walk_one(other)
                continue
            walk_one(child)

    def walk_one(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        walk(node)

    walk(tree)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Edges ``module -> modules it imports`` among the modules of ``package``."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in modules)
                continue
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in modules:
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                edges.add(submodule if submodule in modules else target)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_cycle(graph, set(component)) for component in components]


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A concrete path ``a -> b -> ... -> a`` inside one strongly connected component."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    return sorted(component)


PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "aiayn"


DEPRECATED_EDGES = {"aiayn.model.deprecated_pretrained": "aiayn.formats"}
"""The one import back up, inside the deprecated `Model.save_pretrained` / `from_pretrained`
(removed with them in the next release; `pyproject.toml`'s contract names it too). Which package
may import which is that contract (`lint-imports`); this test finds cycles among modules."""


def cycle_report(root: Path, package: str, ignored: dict[str, str] | None = None) -> list[str]:
    graph = import_graph(root, package)
    for module, target in (ignored or {}).items():
        graph[module].discard(target)
    return [" -> ".join(cycle) for cycle in find_cycles(graph)]


def test_aiayn_has_no_import_cycle() -> None:
    cycles = cycle_report(PACKAGE_ROOT, "aiayn", DEPRECATED_EDGES)
    assert not cycles, "import cycles in src/aiayn:\n" + "\n".join(cycles)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """The cycles the rules above count: an import inside a function, `from pkg import module`
    as an edge to the submodule, a relative import; `TYPE_CHECKING` imports do not count."""
    root = tmp_path / "pkg"
    _write(root, {
        "__init__.py": "",
        "sub/__init__.py": "from pkg.sub.low import helper\n",
        "sub/low.py": "def helper():\n    from pkg import top\n    return top\n",
        "top.py": "from pkg.sub import low\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import other\n",
        "other.py": "from . import typed\n",
    })
    assert cycle_report(root, "pkg") == ["pkg.sub.low -> pkg.top -> pkg.sub.low"]
    graph = import_graph(root, "pkg")
    assert graph["pkg.top"] == {"pkg.sub.low"}  # the submodule, not the package's __init__
    assert graph["pkg.typed"] == set()
    assert graph["pkg.other"] == {"pkg.typed"}
    (root / "typed.py").write_text("def load():\n    from pkg import other\n")  # now it runs
    assert cycle_report(root, "pkg") == [
        "pkg.other -> pkg.typed -> pkg.other", "pkg.sub.low -> pkg.top -> pkg.sub.low"
    ]


def test_a_name_imported_from_a_package_is_an_edge_to_the_package(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    _write(root, {"__init__.py": "from pkg.child import VALUE\n", "child.py": "from pkg import NAME\n"})
    assert cycle_report(root, "pkg") == ["pkg -> pkg.child -> pkg"]
