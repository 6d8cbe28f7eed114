"""The trace's rows (taskmanager/trace_rows.py): a change of several entries is one row that
reads back as those entries, in order, each with its own ts and etag; a change left by an
exception writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_common import jsonx
from taskmanager.trace_rows import GROUP_KIND, Entry, Row, TraceBuffer, expand, rows


def stored(row: Row) -> tuple[str, int | None, str, str]:
    return row.ts, row.etag, row.kind, jsonx.dumps(row.detail)


def test_a_change_of_several_entries_is_one_row_per_workflow_read_back_as_them() -> None:
    entries = [
        Entry("wf-1", "t0", 0, "request", {"source": "planner"}),
        Entry("wf-2", "t1", 3, "event", {"status": "RUNNING"}),
        Entry("wf-1", "t1", 1, "event", {"status": "WORKFLOW_ACCEPTED", "kind": "odd"}),
        Entry("wf-1", "t1", None, "presence", {"state": "offline"}),
    ]
    one, two = rows(entries)
    assert (one.workflow_id, one.kind, two.workflow_id, two.kind) == (
        "wf-1", GROUP_KIND, "wf-2", "event",
    )  # fmt: skip
    want: list[dict[str, Any]] = [
        {"ts": e.ts, "etag": e.etag, "kind": e.kind, **e.detail}
        for e in entries
        if e.workflow_id == "wf-1"
    ]
    assert expand(*stored(one)) == want
    assert expand(*stored(two)) == [{"ts": "t1", "etag": 3, "kind": "event", "status": "RUNNING"}]


def test_entries_join_the_outermost_change_and_an_exception_drops_its_own() -> None:
    written: list[list[Row]] = []
    buffer = TraceBuffer(written.append)
    buffer.record(Entry("wf-1", "t0", 1, "cancel", {}))  # no change open: a row at once
    assert len(written) == 1
    with buffer.grouped():
        buffer.record(Entry("wf-1", "t1", 2, "event", {"status": "COMPLETED"}))
        with pytest.raises(RuntimeError), buffer.grouped():
            buffer.record(Entry("wf-1", "t1", 2, "rolled_back", {}))
            raise RuntimeError
        with buffer.grouped():
            buffer.record(Entry("wf-1", "t1", 2, "event", {"status": "DISPATCHED"}))
        assert len(written) == 1  # nothing before the outermost change closes
    [[row]] = written[1:]
    assert [e["status"] for e in expand(*stored(row))] == ["COMPLETED", "DISPATCHED"]
