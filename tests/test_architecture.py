"""The import rules of docs/architecture.md, checked by walking the source (no Django, no database).

- The read side (``analytics``) is imported by no domain app and no tool: only by the project's
  wiring (``config``), which mounts its URLs.
- The wiring is imported by nobody: domain apps, the read side and the tools hold no settings
  module, URL conf or Celery app of their own (``django.conf.settings``, ``celery.current_app``).
- ``sgr``, ``guard`` and ``retrieval`` never import the conversation domain (``supportdesk``);
  they point at its models by string label only.
- No code outside migrations reaches another app's models by reflection
  (``_meta.get_field(...).related_model``, ``apps.get_model``): it imports what it reads.
- Migrations import no live code (only Django and the standard library): they carry their data.
- The pipeline (``supportdesk/pipeline/``) has no import circle among its modules, counting
  imports inside functions; ``sgr``, ``guard`` and ``retrieval`` never import it, and the
  conversation services do not know it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = ("supportdesk", "sgr", "guard", "retrieval")
LOWER = ("sgr", "guard", "retrieval")  # below the conversation domain
READ_SIDE = "analytics"
APPS = (*DOMAIN, READ_SIDE)
# Project wiring (settings, URLs, the root API, ASGI, Celery app): it may import every layer, and no
# domain app, read-side module or tool imports it.
WIRING = "config"
REFLECTIVE = {"related_model", "get_model"}
PIPELINE = "supportdesk.pipeline"


def _sources(*packages: str, migrations: bool = False) -> Iterator[tuple[str, ast.Module]]:
    """Every module of ``packages``: outside migrations, or (``migrations=True``) only migrations."""
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if ("/migrations/" in relative) != migrations:
                continue
            yield relative, ast.parse(path.read_text(encoding="utf-8"), filename=relative)


def _imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every module a file imports, at any depth (function-level imports included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def _importing(packages: tuple[str, ...], tops: set[str], *, migrations: bool = False) -> list[str]:
    """``path:line imports module`` for every import of a ``tops`` package from ``packages``."""
    return [
        f"{path}:{line} imports {module}"
        for path, tree in _sources(*packages, migrations=migrations)
        for line, module in _imports(tree)
        if _top(module) in tops
    ]


def test_the_source_is_found():
    files = dict(_sources(*APPS))
    assert "analytics/stats.py" in files and "supportdesk/models.py" in files and "sgr/planner.py" in files


def test_only_the_wiring_imports_the_read_side():
    assert _importing((*DOMAIN, "devstack"), {READ_SIDE}) == []
    assert _importing((WIRING,), {READ_SIDE})  # the wiring does mount it


def test_nothing_imports_the_wiring():
    assert _importing((*APPS, "devstack"), {WIRING}) == []


def test_planning_guard_and_retrieval_never_import_the_conversation_domain():
    assert _importing(LOWER, {"supportdesk"}) == []


def test_no_reflective_reads_of_models_outside_migrations():
    found = [
        f"{path}:{node.lineno} uses .{node.attr}"
        for path, tree in _sources(*APPS)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in REFLECTIVE
    ]
    assert found == []


def test_migrations_import_no_live_code():
    assert _importing(APPS, set(APPS), migrations=True) == []


def _module_name(path: str) -> str:
    """``supportdesk/pipeline/answer/stage.py`` -> ``supportdesk.pipeline.answer.stage`` (a package: its name)."""
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(module: str, is_package: bool, tree: ast.Module) -> Iterator[str]:
    """Every module a file's imports load, at any depth, relative ones resolved: for
    ``from a.b import c``, both ``a.b`` and ``a.b.c`` (``c`` may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _import_graph(package: str) -> dict[str, set[str]]:
    """The module import graph of ``package``: module -> the package's modules it imports, at any
    depth. Importing ``a.b.c`` runs the packages ``a.b`` and ``a`` first, so those are edges too."""
    files = {_module_name(path): (path.endswith("__init__.py"), tree) for path, tree in _sources(package)}
    graph: dict[str, set[str]] = {}
    for module, (is_package, tree) in files.items():
        targets: set[str] = set()
        for name in _imported_modules(module, is_package, tree):
            parts = name.split(".")
            targets.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[module] = {t for t in targets if t in files and t != module}
    return graph


def _circle_through(graph: dict[str, set[str]], start: str) -> list[str]:
    """An import circle from ``start`` back to it (its modules, ``start`` at both ends), or ``[]``."""
    seen: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        for target in sorted(graph.get(node, ())):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                found = visit(target, [*path, target])
                if found:
                    return found
        return []

    return visit(start, [start])


def _pipeline_circles() -> list[list[str]]:
    """Circles through a pipeline module, over the whole conversation domain (a circle may leave
    the pipeline and come back through the services)."""
    graph = _import_graph("supportdesk")
    circles = (_circle_through(graph, module) for module in sorted(graph) if module.startswith(PIPELINE))
    return [circle for circle in circles if circle]


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circle_through(graph, "a") == ["a", "b", "c", "a"] and _circle_through(graph, "d") == []
    assert _circle_through({"a": {"b", "c"}, "b": {"c"}, "c": set()}, "a") == []


def test_the_pipeline_graph_is_found():
    graph = _import_graph("supportdesk")
    assert {f"{PIPELINE}.guard", f"{PIPELINE}.plan", f"{PIPELINE}.answer.stage"} <= graph[f"{PIPELINE}.runner"]
    assert f"{PIPELINE}.runner" in graph[f"{PIPELINE}.submit"] and "supportdesk.services" in graph[f"{PIPELINE}.submit"]
    assert f"{PIPELINE}.answer.kb" in graph[f"{PIPELINE}.answer.agent"]
    assert f"{PIPELINE}.leases" in graph["supportdesk.modelstate"]  # imports inside functions count


def test_the_pipeline_has_no_import_circle():
    assert _pipeline_circles() == []


def _imports_pipeline(path: str, tree: ast.Module) -> list[str]:
    return sorted({name for name in _imported_modules(_module_name(path), path.endswith("__init__.py"), tree)
                   if name == PIPELINE or name.startswith(f"{PIPELINE}.") or name == "supportdesk.tasks"})


def test_planning_guard_and_retrieval_never_import_the_pipeline():
    found = [f"{path} imports {', '.join(names)}" for path, tree in _sources(*LOWER)
             if (names := _imports_pipeline(path, tree))]
    assert found == []


def test_the_services_do_not_know_the_pipeline():
    """The conversation services write conversations and turns; which stage runs is the pipeline's."""
    lower = {"supportdesk/services.py", "supportdesk/selectors.py", "supportdesk/events.py", "supportdesk/models.py"}
    found = [f"{path} imports {', '.join(names)}" for path, tree in _sources("supportdesk")
             if path in lower and (names := _imports_pipeline(path, tree))]
    assert found == []
