"""Workflows and tasks: validation, the state machine, deadlines, resources, event policy,
persistence, recovery (SPEC §4). Built in the TaskManager issue.
The face: what other packages may use is `__all__`, imported from here (`from taskmanager import
Callback`), never from a submodule; tests/test_faces.py holds it. The names load on first use
(PEP 562), so importing the package costs nothing and the CLI's lazy imports stay lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a_common.faces import Face, lazy_face

if TYPE_CHECKING:
    from taskmanager.agents import AgentStore as AgentStore
    from taskmanager.board import Board as Board
    from taskmanager.catalog import Catalog as Catalog
    from taskmanager.catalog import load_catalog as load_catalog
    from taskmanager.confirm import STOP_SUFFIX as STOP_SUFFIX
    from taskmanager.confirm import Unconfirmed as Unconfirmed
    from taskmanager.confirm import Watch as Watch
    from taskmanager.confirm import on_due as confirm_on_due
    from taskmanager.confirm import verdict as confirm_verdict
    from taskmanager.confirm import watch_for as confirm_watch_for
    from taskmanager.effects import EffectCatalog as EffectCatalog
    from taskmanager.effects import load_effects as load_effects
    from taskmanager.errors import CatalogError as CatalogError
    from taskmanager.errors import EffectsError as EffectsError
    from taskmanager.events import (
        Callback as Callback,
    )
    from taskmanager.events import (
        CancelTask as CancelTask,
    )
    from taskmanager.events import (
        Command as Command,
    )
    from taskmanager.events import (
        Observe as Observe,
    )
    from taskmanager.events import (
        Report as Report,
    )
    from taskmanager.migrations import MIGRATIONS as MIGRATIONS
    from taskmanager.model import (
        ACTIVE_STEP as ACTIVE_STEP,
    )
    from taskmanager.model import (
        TERMINAL_STEP as TERMINAL_STEP,
    )
    from taskmanager.model import (
        CallbackStatus as CallbackStatus,
    )
    from taskmanager.model import (
        Workflow as Workflow,
    )
    from taskmanager.service import (
        TaskManager as TaskManager,
    )
    from taskmanager.shell_io import (
        Message as Message,
    )
    from taskmanager.shell_io import (
        Result as Result,
    )
    from taskmanager.shell_io import (
        TurnRef as TurnRef,
    )
    from taskmanager.store import WorkflowStore as WorkflowStore

__all__ = [
    "ACTIVE_STEP",
    "MIGRATIONS",
    "STOP_SUFFIX",
    "TERMINAL_STEP",
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
    "Message",
    "Observe",
    "Report",
    "Result",
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
]

# name -> (submodule, attribute)
_FACE: Face = {
    "ACTIVE_STEP": ("taskmanager.model", "ACTIVE_STEP"),
    "AgentStore": ("taskmanager.agents", "AgentStore"),
    "Board": ("taskmanager.board", "Board"),
    "Callback": ("taskmanager.events", "Callback"),
    "CallbackStatus": ("taskmanager.model", "CallbackStatus"),
    "CancelTask": ("taskmanager.events", "CancelTask"),
    "Catalog": ("taskmanager.catalog", "Catalog"),
    "CatalogError": ("taskmanager.errors", "CatalogError"),
    "Command": ("taskmanager.events", "Command"),
    "EffectCatalog": ("taskmanager.effects", "EffectCatalog"),
    "EffectsError": ("taskmanager.errors", "EffectsError"),
    "MIGRATIONS": ("taskmanager.migrations", "MIGRATIONS"),
    "Message": ("taskmanager.shell_io", "Message"),
    "Observe": ("taskmanager.events", "Observe"),
    "Report": ("taskmanager.events", "Report"),
    "Result": ("taskmanager.shell_io", "Result"),
    "STOP_SUFFIX": ("taskmanager.confirm", "STOP_SUFFIX"),
    "TERMINAL_STEP": ("taskmanager.model", "TERMINAL_STEP"),
    "TaskManager": ("taskmanager.service", "TaskManager"),
    "TurnRef": ("taskmanager.shell_io", "TurnRef"),
    "Unconfirmed": ("taskmanager.confirm", "Unconfirmed"),
    "Watch": ("taskmanager.confirm", "Watch"),
    "Workflow": ("taskmanager.model", "Workflow"),
    "WorkflowStore": ("taskmanager.store", "WorkflowStore"),
    "confirm_on_due": ("taskmanager.confirm", "on_due"),
    "confirm_verdict": ("taskmanager.confirm", "verdict"),
    "confirm_watch_for": ("taskmanager.confirm", "watch_for"),
    "load_catalog": ("taskmanager.catalog", "load_catalog"),
    "load_effects": ("taskmanager.effects", "load_effects"),
}

if not TYPE_CHECKING:  # a type checker sees the imports above and no catch-all
    __getattr__, __dir__ = lazy_face(globals(), _FACE)
