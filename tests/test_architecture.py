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


def test_the_source_is_found():
    files = dict(_sources(*APPS))
    assert "analytics/stats.py" in files and "supportdesk/models.py" in files and "sgr/planner.py" in files


def test_only_the_wiring_imports_the_read_side():
    found = [
        f"{path}:{line} imports {module}"
        for path, tree in _sources(*DOMAIN, "devstack")
        for line, module in _imports(tree)
        if _top(module) == READ_SIDE
    ]
    assert found == []
    assert any(_top(module) == READ_SIDE for _path, tree in _sources(WIRING) for _line, module in _imports(tree))


def test_nothing_imports_the_wiring():
    found = [
        f"{path}:{line} imports {module}"
        for path, tree in _sources(*APPS, "devstack")
        for line, module in _imports(tree)
        if _top(module) == WIRING
    ]
    assert found == []


def test_planning_guard_and_retrieval_never_import_the_conversation_domain():
    found = [
        f"{path}:{line} imports {module}"
        for path, tree in _sources(*LOWER)
        for line, module in _imports(tree)
        if _top(module) == "supportdesk"
    ]
    assert found == []


def test_no_reflective_reads_of_models_outside_migrations():
    found = [
        f"{path}:{node.lineno} uses .{node.attr}"
        for path, tree in _sources(*APPS)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in REFLECTIVE
    ]
    assert found == []


def test_migrations_import_no_live_code():
    found = [
        f"{path}:{line} imports {module}"
        for path, tree in _sources(*APPS, migrations=True)
        for line, module in _imports(tree)
        if _top(module) in APPS
    ]
    assert found == []
