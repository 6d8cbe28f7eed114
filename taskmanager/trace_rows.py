"""A workflow's trace, one row per change (issue 36): what one unit of work records of a workflow
(its events, decisions, confirmations…) is written as ONE `workflow_trace` row, not one row per
entry. A change of one entry keeps the row it always had (`kind`, `detail`); a change of several
writes a row of kind `change` whose `detail` is `{"events": [...]}`, each entry
`{"kind": ..., "detail": {...}}` plus its own `ts` / `etag` when they differ from the row's
(the first entry's). `expand` reads both, and rows written before this change, back into the
same entries, in order.

`TraceBuffer` gathers the entries while a change is open (`grouped()`, nested levels join the
outermost; a level left by an exception drops its entries: its writes rolled back) and hands
the rows to write when the outermost level closes, inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

GROUP_KIND = "change"  # a row carrying several entries of one change


@dataclass(frozen=True)
class Entry:
    workflow_id: str
    ts: str
    etag: int | None
    kind: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Row:
    workflow_id: str
    ts: str
    etag: int | None
    kind: str
    detail: dict[str, Any]


def rows(entries: list[Entry]) -> list[Row]:
    """One row per workflow, in the order each workflow was first traced; its entries in order."""
    by_workflow: dict[str, list[Entry]] = {}
    for entry in entries:
        by_workflow.setdefault(entry.workflow_id, []).append(entry)
    out = []
    for workflow_id, mine in by_workflow.items():
        first = mine[0]
        if len(mine) == 1:
            out.append(Row(workflow_id, first.ts, first.etag, first.kind, first.detail))
            continue
        events = []
        for entry in mine:
            event: dict[str, Any] = {"kind": entry.kind, "detail": entry.detail}
            if entry.ts != first.ts:
                event["ts"] = entry.ts
            if entry.etag != first.etag:
                event["etag"] = entry.etag
            events.append(event)
        out.append(Row(workflow_id, first.ts, first.etag, GROUP_KIND, {"events": events}))
    return out


def unpack(workflow_id: str, ts: str, etag: int | None, kind: str, detail: str) -> list[Entry]:
    """A stored row's entries, in order: one for a row of one entry, each of a change's."""
    body = json.loads(detail)
    if kind != GROUP_KIND:
        return [Entry(workflow_id, ts, etag, kind, body)]
    return [
        Entry(
            workflow_id,
            event.get("ts", ts),
            event.get("etag", etag),  # a JSON null is an etag too
            event["kind"],
            event["detail"],
        )
        for event in body["events"]
    ]


def expand(ts: str, etag: int | None, kind: str, detail: str) -> list[dict[str, Any]]:
    """A stored row as the timeline's entries: `{"ts", "etag", "kind", **detail}` each."""
    return [
        {"ts": e.ts, "etag": e.etag, "kind": e.kind, **e.detail}
        for e in unpack("", ts, etag, kind, detail)
    ]


class TraceBuffer:
    """The entries of the change open now. `write` takes the rows when the outermost level
    closes; with no level open, `record` writes the entry's row at once."""

    def __init__(self, write: Callable[[list[Row]], None]) -> None:
        self._write = write
        self._levels: list[list[Entry]] = []

    def record(self, entry: Entry) -> None:
        if self._levels:
            self._levels[-1].append(entry)
        else:
            self._write(rows([entry]))

    @contextmanager
    def grouped(self) -> Iterator[None]:
        self._levels.append([])
        try:
            yield
        except BaseException:
            self._levels.pop()  # its writes rolled back: so do its entries
            raise
        entries = self._levels.pop()
        if self._levels:
            self._levels[-1].extend(entries)
        elif entries:
            self._write(rows(entries))
