"""The packages' faces: what `cache`, `cloud_client`, `sync` and `taskmanager` let other packages
use is their `__all__`, written out here so that a change to a face is a visible diff, and
`edge` imports nothing else of them (never a submodule)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

FACES = {
    "cache": [
        "CacheStore",
        "CacheView",
        "CandidateIn",
        "CategoryPolicy",
        "DailySummary",
        "FINGERPRINT_KEY",
        "Lexicon",
        "LexiconError",
        "MIGRATIONS",
        "Memory",
        "MemoryPolicy",
        "PairView",
        "PrivacyPolicy",
        "ProfileView",
        "PromotionPolicy",
        "SYNC_REFUSED",
        "StepOutcome",
        "SyncPosition",
        "UpdateInput",
        "build_snapshot",
        "extended_lexicon",
        "focused",
        "list_pairs",
        "list_sessions",
        "load_lexicon_file",
        "observed_candidates",
        "plan_update",
        "query",
        "relabel_if_changed",
        "shipped",
        "state_of",
        "value_key",
    ],
    "cloud_client": [
        "CloudClient",
        "CloudError",
        "CloudUnavailable",
        "DEFAULT_MAX_BYTES",
        "SyncUpdates",
        "TlsMode",
        "TurnRequest",
        "TurnResponse",
        "VoiceContext",
        "checked_url",
        "clear_text_token",
        "host_of",
        "security_warnings",
        "tls_mode",
    ],
    "sync": ["MIGRATIONS", "Pending", "Position", "Replayer", "SyncOutbox"],
    "taskmanager": [
        "ACTIVE_STEP",
        "AgentStore",
        "Board",
        "Callback",
        "CallbackStatus",
        "CancelTask",
        "Catalog",
        "CatalogError",
        "Command",
        "EffectCatalog",
        "EffectsError",
        "MIGRATIONS",
        "Message",
        "Observe",
        "Report",
        "Result",
        "STOP_SUFFIX",
        "TERMINAL_STEP",
        "TaskManager",
        "TurnRef",
        "Unconfirmed",
        "Watch",
        "Workflow",
        "WorkflowStore",
        "confirm_on_due",
        "confirm_verdict",
        "confirm_watch_for",
        "load_catalog",
        "load_effects",
    ],
}


def _package(name: str) -> ModuleType:
    return importlib.import_module(name)


def _submodules(package: ModuleType) -> set[str]:
    return {info.name for info in pkgutil.iter_modules(package.__path__)}


@pytest.mark.parametrize("name", sorted(FACES))
def test_the_face_is_the_listed_names(name: str) -> None:
    assert sorted(_package(name).__all__) == FACES[name]


@pytest.mark.parametrize("name", sorted(FACES))
def test_every_name_of_the_face_imports_from_the_package(name: str) -> None:
    package = _package(name)
    namespace: dict[str, object] = {}
    exec(f"from {name} import {', '.join(package.__all__)}", namespace)  # the importer's way
    face = package._FACE
    assert sorted(face) == FACES[name]  # the lazy table and `__all__` agree
    for public, (module, attribute) in face.items():
        assert namespace[public] is getattr(importlib.import_module(module), attribute), public


@pytest.mark.parametrize("name", sorted(FACES))
def test_no_name_of_the_face_is_a_submodule(name: str) -> None:
    """Importing `pkg.x` sets the attribute `x` of the package to the module: a face name
    spelled like a submodule would turn into that module once something imports it."""
    package = _package(name)
    assert not set(package.__all__) & _submodules(package)


def _deep_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module in FACES:  # `from cache import memory` names a submodule too
                submodules = _submodules(_package(node.module))
                modules += [f"{node.module}.{a.name}" for a in node.names if a.name in submodules]
        else:
            continue
        for module in modules:
            if module.split(".")[0] in FACES and module not in FACES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    return found


def test_edge_imports_only_the_faces() -> None:
    paths = sorted((ROOT / "edge").rglob("*.py"))
    assert paths
    assert [line for path in paths for line in _deep_imports(path)] == []


def test_the_deep_import_check_sees_every_spelling(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import cache.memory\n"
        "from cache import memory\n"
        "from sync.outbox import SyncOutbox\n"
        "def f() -> None:\n"
        "    from taskmanager.service import TaskManager\n"
        "from cache import Memory\n"
        "import cache\n"
    )
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        found = _deep_imports(module)
    finally:
        ROOT = root
    assert [line.split(" imports ")[1] for line in found] == [
        "cache.memory",
        "cache.memory",
        "sync.outbox",
        "taskmanager.service",
    ]


def test_the_state_db_takes_every_package_migration_once() -> None:
    from edge.store.schema import MIGRATIONS

    names = [m.name for m in MIGRATIONS]
    for name in sorted(FACES):
        for migration in getattr(_package(name), "MIGRATIONS", []):
            assert names.count(migration.name) == 1, migration.name
