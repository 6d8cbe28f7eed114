"""One WARNING per (capability, operation, key) of dropped evidence, so the device team learns
what its agent sends that the catalog does not take (SPEC 4.5). Keys only, never values; a key
is cut to 64 characters and shown with `repr` (it is the agent's string: no line breaks reach
the log). Bounded against a flood of made-up keys: at most `per_callback` lines per callback
(then one line with how many more), and past `limit` remembered keys no more new ones."""

from __future__ import annotations

import logging

from taskmanager.catalog import Operation
from taskmanager.evidence import NOT_AN_OBJECT, Dropped

log = logging.getLogger("taskmanager.evidence")


class DropWarnings:
    def __init__(self, limit: int = 1024, per_callback: int = 8) -> None:
        self._said: set[tuple[str, str, str]] = set()
        self._limit = limit
        self._per_callback = per_callback

    def warn(self, task_id: str, operation: Operation, dropped: tuple[Dropped, ...]) -> None:
        op = f"{operation.capability_id}.{operation.operation_id}"
        fresh: list[Dropped] = []
        for item in dropped:
            said = (operation.capability_id, operation.operation_id, (item.key or "")[:64])
            if said not in self._said and len(self._said) < self._limit:
                self._said.add(said)
                fresh.append(item)
        shown = fresh[: self._per_callback]
        for item in shown:
            self._line(task_id, op, operation, item)
        if len(fresh) > len(shown):
            more = len(dropped) - len(shown)
            log.warning("task %s: %d more evidence keys dropped (%s)", task_id, more, op)

    @staticmethod
    def _line(task_id: str, op: str, operation: Operation, item: Dropped) -> None:
        key = (item.key or "")[:64]
        if item.why == NOT_AN_OBJECT:
            log.warning("task %s: evidence is not an object; dropped (%s)", task_id, op)
        elif item.listed:
            log.warning(
                "task %s: evidence %r of %s dropped: %s (once per key)", task_id, key, op, item.why
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
