from __future__ import annotations

from a2a_common.errors import EdgeError


class TaskError(EdgeError):
    """Root of the TaskManager's errors."""


class CatalogError(TaskError):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


class EffectsError(CatalogError):
    """A bad effect catalog (`[experience] effects_file`, SPEC §4.5): the start stops (exit 2)."""
