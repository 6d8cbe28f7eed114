"""A write owed to the cloud's memory sync (SPEC §3.2), as the domain packages produce it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

WriteKind = Literal[
    "short_term_pair",
    "profile_candidate",
    "profile_confirmed",
    "memory_deletion",
    "task_terminal",
    "consent",
]


@dataclass(frozen=True)
class SyncWrite:
    kind: WriteKind
    payload: dict[str, Any]
