"""The package's modules import one another without cycles, and its subpackages one way
but for one known cycle: read from the source (imports at module level, those under ``if
TYPE_CHECKING:`` left out, as Python never runs them), so a cycle is found before an import
order happens to trip on it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ivm_assets

ROOT = Path(ivm_assets.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``path`` imports when it is loaded. ``from pkg import sub``
    names the submodule, not the package it comes from."""
    found: set[str] = set()
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        for node in ast.walk(statement) if isinstance(statement, (ast.Import, ast.ImportFrom, ast.If, ast.Try)) else ():
            if isinstance(node, ast.ImportFrom) and node.module in modules:
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                found |= subs or {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names} & modules.keys()
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_module_imports_itself_through_others():
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    assert len(graph) > 100 and graph["ivm_assets.rules.distinct"]  # the source was read
    assert _cycles(graph) == []


def test_packages_import_one_way():
    """Between the package's subpackages imports go one way: the SQL front end imports no
    engine, the rules no engine, state tables no operators, and ``testing`` (the crash
    tests' fault points, which ``delta`` and ``spark`` call) nothing of the package's."""
    modules = _modules()
    packages: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = ".".join(name.split(".")[:2])
        packages.setdefault(package, set()).update(
            p for p in (".".join(m.split(".")[:2]) for m in _imports(path, modules)) if p != package
        )
    assert _cycles(packages) == []
    assert packages["ivm_assets.testing"] == set()
    # The IR and the rules are engine-free: the renderers import them, never the other way.
    engines = {"ivm_assets.render", "ivm_assets.engine", "ivm_assets.spark", "ivm_assets.dagster"}
    assert packages["ivm_assets.ir"] & (engines | {"ivm_assets.rules"}) == set()
    assert packages["ivm_assets.rules"] & engines == set()


def _third_party(path: Path) -> set[str]:
    """The top-level packages outside ivm_assets that ``path`` imports when it is loaded."""
    found: set[str] = set()
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        for node in ast.walk(statement) if isinstance(statement, (ast.Import, ast.ImportFrom, ast.If, ast.Try)) else ():
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
    return found - {"ivm_assets", "__future__"}


def test_the_dataflow_loads_without_an_engine():
    """Building a view's dataflow (the plan, the operators, their rules and state tables)
    loads neither Spark nor DuckDB nor delta-rs: those are the renderers' and the state
    store's (checked in a fresh interpreter, as a user's process would load it)."""
    code = (
        "import sys, ivm_assets.rules.incrementalize\n"
        "print(sorted(m for m in ('pyspark', 'duckdb', 'deltalake', 'ivm_assets.delta', 'ivm_assets.render') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_the_operators_and_their_rules_touch_no_engine():
    """An operator binds its rule through the ``EpochBinding`` protocol and never calls Spark
    or DuckDB itself: what each engine does with it is in ``render/``."""
    rules = [path for name, path in _modules().items() if name.startswith(("ivm_assets.rules", "ivm_assets.ir"))]
    assert len(rules) > 15
    assert {path.name: _third_party(path) & {"pyspark", "duckdb"} for path in rules} == {path.name: set() for path in rules}


def test_a_cycle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
