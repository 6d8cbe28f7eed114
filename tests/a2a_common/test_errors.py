"""Every error the runtime packages define hangs under EdgeError, and the drawing of the tree in
`a2a_common/errors.py` names each one, where it lives and under which parent."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType

import pytest

import a2a_common.errors
from a2a_common.errors import EdgeError

PACKAGES = ("a2a_common", "edge", "cloud_client", "cache", "taskmanager", "sync")


_LINE = re.compile(
    r"^(?P<lead>[ |]*)[*+\-·] (?P<name>\w+) +(?P<module>[\w.]+)(?: +\(also an? (?P<also>\w+)\))?$"
)


@dataclass(frozen=True)
class Drawn:
    name: str
    module: str
    parent: str | None
    also: str | None


def _modules() -> list[ModuleType]:
    found = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the CLI when imported
                continue
            found.append(importlib.import_module(info.name))
    return found


def _defined_errors() -> dict[str, type[BaseException]]:
    errors: dict[str, type[BaseException]] = {}
    for module in _modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                assert value.__name__ not in errors, f"two errors named {value.__name__}"
                errors[value.__name__] = value
    return errors


def _drawing() -> dict[str, Drawn]:
    doc = a2a_common.errors.__doc__ or ""
    drawn: dict[str, Drawn] = {}
    path: list[str] = []  # the names on the way down to the line read last
    for line in doc.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        depth = len(match["lead"]) // 2
        assert depth <= len(path), f"the tree skips a level at {line!r}"
        del path[depth:]
        name = match["name"]
        drawn[name] = Drawn(name, match["module"], path[-1] if path else None, match["also"])
        path.append(name)
    return drawn


ERRORS = _defined_errors()
DRAWN = _drawing()


def test_the_walk_finds_the_errors_of_every_package() -> None:
    modules = {cls.__module__.split(".")[0] for cls in ERRORS.values()}
    assert modules >= {"a2a_common", "edge", "cloud_client", "cache", "taskmanager", "sync"}


def test_the_drawing_is_a_tree_rooted_at_edge_error() -> None:
    roots = [d.name for d in DRAWN.values() if d.parent is None]
    assert roots == ["EdgeError"]
    assert len(DRAWN) > 10


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_every_error_derives_from_edge_error(name: str) -> None:
    cls = ERRORS[name]
    assert issubclass(cls, EdgeError), f"{cls.__module__}.{name} is not an EdgeError"


def test_the_drawing_names_every_error_and_no_other() -> None:
    assert set(DRAWN) == set(ERRORS)


@pytest.mark.parametrize("name", sorted(DRAWN))
def test_each_drawn_error_lives_where_drawn_under_its_parent(name: str) -> None:
    drawn, cls = DRAWN[name], ERRORS[name]
    assert cls.__module__ == drawn.module
    bases = {base.__name__ for base in cls.__bases__}
    if drawn.parent is None:
        assert cls is EdgeError
        return
    assert drawn.parent in bases
    # every other error it derives from is named beside it
    others = {b.__name__ for b in cls.__bases__ if issubclass(b, EdgeError)} - {drawn.parent}
    assert others == ({drawn.also} if drawn.also else set())
