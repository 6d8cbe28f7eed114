"""The pending-sync outbox to the cloud: ordered replay with cursor/version, conflicts, dead
letters (SPEC §3.2). Built in the offline-first sync issue.
The face: what other packages may use is `__all__`, imported from here (`from sync import
Pending`), never from a submodule; tests/test_faces.py holds it. The names load on first use
(PEP 562), so importing the package costs nothing and the CLI's lazy imports stay lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a_common.faces import Face, lazy_face

if TYPE_CHECKING:
    from sync.core import Pending as Pending
    from sync.core import Position as Position
    from sync.migrations import MIGRATIONS as MIGRATIONS
    from sync.outbox import SyncOutbox as SyncOutbox
    from sync.replay import Replayer as Replayer

__all__ = [
    "MIGRATIONS",
    "Pending",
    "Position",
    "Replayer",
    "SyncOutbox",
]

# name -> (submodule, attribute)
_FACE: Face = {
    "MIGRATIONS": ("sync.migrations", "MIGRATIONS"),
    "Pending": ("sync.core", "Pending"),
    "Position": ("sync.core", "Position"),
    "Replayer": ("sync.replay", "Replayer"),
    "SyncOutbox": ("sync.outbox", "SyncOutbox"),
}

if not TYPE_CHECKING:  # a type checker sees the imports above and no catch-all
    __getattr__, __dir__ = lazy_face(globals(), _FACE)
