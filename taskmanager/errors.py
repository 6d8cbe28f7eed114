from __future__ import annotations

from a2a_common.errors import EdgeError


class TaskError(EdgeError):
    """Root of the TaskManager's errors."""


class CatalogError(TaskError):
    """A bad capability catalog: the start stops (exit 2). `key` is the config key the operator
    fixes (the CLI's `config error: <key>: …`)."""

    key = "taskmanager.catalog_file"

    def __init__(self, where: str, message: str, *, key: str | None = None) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        if key is not None:
            self.key = key


class EffectsError(CatalogError):
    """A bad effect catalog (`[experience] effects_file`, SPEC §4.5): the start stops (exit 2)."""

    key = "experience.effects_file"
