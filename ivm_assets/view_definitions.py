"""A project's views as declared: read from ``views/*.sql`` (or given in code), parsed, their
dependencies resolved against the declared sources and views, and put in dependency order.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from ivm_assets.config import ProjectConfig, ViewSettings, case_collisions, name_problem
from ivm_assets.engine.compile import ViewDefinition
from ivm_assets.errors import ConfigError, SqlError, ViewCycleError
from ivm_assets.sql.parse import parse_view, referenced_tables


def read_views(root: Path, config: ProjectConfig) -> dict[str, ViewDefinition]:
    """The views of the project folder ``root``: one per ``views/*.sql``, its name the file's;
    settings in ``config`` for a view without a file, a file name that is not a valid name,
    or two names Spark would take for one are a ConfigError."""
    views_dir = root / "views"
    files = sorted(views_dir.glob("*.sql")) if views_dir.is_dir() else []
    names = {f.stem for f in files}
    for name in config.views:
        if name not in names:
            raise ConfigError(
                f"{root / 'ivm.yaml'}: settings for view `{name}` but there is no views/{name}.sql; "
                f"views found: {', '.join(sorted(names)) or 'none'}"
            )
    for file in files:
        if problem := name_problem(file.stem):
            raise ConfigError(f"{file}: the file name is the view's name, and {problem}; rename the file")
    for a, b in case_collisions([*config.sources, *sorted(names)]):
        kinds = " and ".join("source" if n in config.sources else f"view (views/{n}.sql)" for n in (a, b))
        same = "is both a source and a view" if a == b else f"and `{b}` differ only in case ({kinds})"
        raise ConfigError(
            f"{root / 'ivm.yaml'}: `{a}` {same}, and Spark SQL resolves table names case-insensitively; rename one"
        )
    views = {}
    for file in files:
        views[file.stem] = view_definition(
            file.stem, file.read_text(), str(file), config.views.get(file.stem, ViewSettings()), set(config.sources), names
        )
    return views


def view_definition(name: str, text: str, file: str | None, settings: ViewSettings, sources: set[str], views: set[str]) -> ViewDefinition:
    """View ``name`` of SQL ``text`` (from ``file``), parsed; each table it reads resolved to the
    declared spelling of one of ``sources`` or ``views``, an unknown one an SqlError at its place."""
    statement = parse_view(name, text, file=file)
    # Table names resolve case-insensitively, as in Spark; dependencies use the declared names.
    declared = {n.lower(): n for n in sources | views}
    deps = []
    for table, line, col in referenced_tables(statement, text):
        if table.lower() not in declared:
            known = ", ".join(sorted(sources | views)) or "none"
            raise SqlError(
                f"unknown table `{table}`; known sources and views: {known}",
                view=name, file=file, line=line, col=col,
                hint="declare it under `sources:` in ivm.yaml, or add views/<name>.sql",
            )
        if declared[table.lower()] not in deps:
            deps.append(declared[table.lower()])
    return ViewDefinition(name, text, file, statement, settings, tuple(deps))


def dependency_order(views: dict[str, ViewDefinition]) -> list[str]:
    """The names of ``views``, each after the views it reads; a cycle is a ViewCycleError."""
    graph = {name: {d for d in v.dependencies if d in views} for name, v in views.items()}
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        raise ViewCycleError(
            "views refer to each other in a cycle: " + " -> ".join(cycle)
            + f" (files: {', '.join(views[c].file or c for c in dict.fromkeys(cycle))}). "
            "A view cannot read itself, directly or through other views; break the cycle."
        ) from exc
