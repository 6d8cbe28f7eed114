"""WorkflowStore's counts, on a real SQLite file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from taskmanager.model import WorkflowStatus
from taskmanager.store import WorkflowStore
from tests.taskmanager.helpers import MOVE_PURIFY, T0, workflow


def test_counts_by_status_and_active(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "s.db", MIGRATIONS)
    store = WorkflowStore(db=db)
    assert store.counts_by_status() == {} and store.active_count() == 0
    statuses: list[WorkflowStatus] = ["running", "completed", "running", "cancelled", "accepted"]
    with db.atomic():
        for n, status in enumerate(statuses):
            wf = workflow(MOVE_PURIFY, workflow_id=f"wf-{n}")
            store.save(dataclasses.replace(wf, status=status), T0)
        store.save_rejected("wf-bad", "no such operation", {}, "planner", None, T0)
    counts = store.counts_by_status()
    assert counts == {"accepted": 1, "cancelled": 1, "completed": 1, "rejected": 1, "running": 2}
    assert list(counts) == sorted(counts)
    assert store.active_count() == 3  # running, running, accepted
    db.close()
