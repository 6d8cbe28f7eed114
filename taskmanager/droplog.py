"""One WARNING per (capability, operation, key) of dropped evidence, so the device team learns
what its agent sends that the catalog does not take (SPEC 4.5). Keys only, never values; a key
is cut to 64 characters and shown with `repr` (it is the agent's string: no line breaks reach
the log). The memory of what was said is bounded: past `limit` keys it stops warning."""

from __future__ import annotations

import logging

from taskmanager.catalog import Operation
from taskmanager.evidence import NOT_AN_OBJECT, Dropped

log = logging.getLogger("taskmanager.evidence")


class DropWarnings:
    def __init__(self, limit: int = 1024) -> None:
        self._said: set[tuple[str, str, str]] = set()
        self._limit = limit

    def warn(self, task_id: str, operation: Operation, dropped: tuple[Dropped, ...]) -> None:
        op = f"{operation.capability_id}.{operation.operation_id}"
        for item in dropped:
            key = "" if item.key is None else item.key[:64]
            said = (operation.capability_id, operation.operation_id, f"{item.why}:{key}")
            if said in self._said or len(self._said) >= self._limit:
                continue
            self._said.add(said)
            if item.why == NOT_AN_OBJECT:
                log.warning("task %s: evidence is not an object; dropped (%s)", task_id, op)
            elif item.listed:
                log.warning(
                    "task %s: evidence %r of %s dropped: %s (once per key)",
                    task_id,
                    key,
                    op,
                    item.why,
                )
            else:
                log.warning(
                    "task %s: evidence key %r is not terminal evidence of %s; dropped"
                    " (once per key; allowed: %s)",
                    task_id,
                    key,
                    op,
                    ", ".join(operation.terminal_evidence) or "none",
                )
