"""A package's face loaded on first use: `__getattr__` and `__dir__` for an `__init__.py` that
lists what it exports as `name -> (submodule, attribute)` (PEP 562). Importing the package
costs nothing; the first lookup of a name imports its submodule and binds the name."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

Face = dict[str, tuple[str, str]]


def lazy_face(
    namespace: dict[str, Any], face: Face
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of the package whose globals are
    `namespace`."""

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = face[name]
        except KeyError:
            package = namespace["__name__"]
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(import_module(module), attribute)
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace["__all__"]})

    return __getattr__, __dir__
