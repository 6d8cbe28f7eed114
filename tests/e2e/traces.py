"""A workflow's trace as the tests read it from the state DB: one (kind, detail) pair per entry,
in order, a change's row expanded (taskmanager/trace_rows.py) — what the rows held when each
entry was a row of its own (issue 36), `detail` as the store writes JSON."""

from __future__ import annotations

from a2a_common import jsonx
from taskmanager.trace_rows import unpack
from tests.conftest import StateRows


def trace_entries(
    state_rows: StateRows, workflow_id: str | None = None, kind: str | None = None
) -> list[tuple[str, str]]:
    """(kind, detail JSON) of every entry, of one workflow and of one kind when given."""
    where, params = ("WHERE workflow_id = ?", (workflow_id,)) if workflow_id else ("", ())
    rows = state_rows(
        f"SELECT workflow_id, ts, etag, kind, detail FROM workflow_trace {where} ORDER BY id",
        params,
    )
    return [
        (e.kind, jsonx.dumps(e.detail))
        for row in rows
        for e in unpack(*row)
        if kind is None or e.kind == kind
    ]


def trace_details(
    state_rows: StateRows, workflow_id: str | None = None, kind: str | None = None
) -> list[str]:
    """The detail JSON of every entry `trace_entries` gives."""
    return [detail for _, detail in trace_entries(state_rows, workflow_id, kind)]
