"""What the runtime keeps only for a while: ended workflows with their traces, and inbound
dedupe marks — pruned in bounded batches, active workflows never."""

from __future__ import annotations

from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from edge.store.inbox import InboxDedupe
from edge.store.schema import MIGRATIONS
from sim.broker import Mosquitto
from taskmanager.store import WorkflowStore
from tests.conftest import RuntimeFactory, StateRows, eventually

OLD, NEW = "2026-01-01T00:00:00.000Z", "2026-11-29T00:00:00.000Z"


def seed(db: Database, *, running: bool = True) -> None:
    """Ended workflows old and new (and, for the store alone, an old running one: its doc is a
    stub the service could not load)."""
    workflows = [
        ("wf-old-done", "completed", OLD),
        ("wf-old-cancelled", "cancelled", OLD),
        ("wf-new-done", "completed", NEW),
    ] + ([("wf-old-running", "running", OLD)] if running else [])
    with db.atomic():
        for workflow_id, status, updated in workflows:
            db.execute(
                "INSERT INTO workflows (workflow_id, status, etag, source, doc, created_at,"
                " updated_at) VALUES (?, ?, 1, 'push', '{}', ?, ?)",
                [workflow_id, status, updated, updated],
            )
            db.execute(
                "INSERT INTO workflow_trace (workflow_id, ts, kind, detail)"
                " VALUES (?, ?, 'accepted', '{}')",
                [workflow_id, updated],
            )
        for key, seen in (("turn:a", OLD), ("turn:b", OLD), ("turn:c", NEW)):
            db.execute(
                "INSERT INTO inbox_seen (key, topic, seen_at) VALUES (?, 't', ?)", [key, seen]
            )


def ids(db: Database, sql: str) -> list[str]:
    return sorted(r[0] for r in db.execute(sql).fetchall())


def test_ended_workflows_and_old_marks_go_in_bounded_batches(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    seed(db)
    store = WorkflowStore(db=db)
    dedupe = InboxDedupe(db=db, clock=ManualClock())
    cutoff = "2026-06-01T00:00:00.000Z"
    with db.atomic():
        assert store.prune_ended(cutoff, limit=1) == 1
        assert dedupe.prune(cutoff, limit=1) == 1
    with db.atomic():
        assert store.prune_ended(cutoff, limit=10) == 1
        assert dedupe.prune(cutoff, limit=10) == 1
    with db.atomic():
        assert store.prune_ended(cutoff, limit=10) == 0
        assert dedupe.prune(cutoff, limit=10) == 0
    assert ids(db, "SELECT workflow_id FROM workflows") == ["wf-new-done", "wf-old-running"]
    assert ids(db, "SELECT workflow_id FROM workflow_trace") == ["wf-new-done", "wf-old-running"]
    assert ids(db, "SELECT key FROM inbox_seen") == ["turn:c"]


def test_the_service_prunes_at_start(
    tmp_path: Path, state_rows: StateRows, broker: Mosquitto, runtime_factory: RuntimeFactory
) -> None:
    db = open_state_db(tmp_path / "state" / "state.db", MIGRATIONS)
    seed(db, running=False)
    db.close()
    runtime = runtime_factory()

    def left() -> tuple[list[str], list[str]]:
        workflows = sorted(r[0] for r in state_rows("SELECT workflow_id FROM workflows"))
        marks = sorted(r[0] for r in state_rows("SELECT key FROM inbox_seen"))
        return workflows, marks

    eventually(lambda: left()[0] == ["wf-new-done"])
    assert "turn:a" not in left()[1] and "turn:c" in left()[1]
    assert "pruned 2 ended workflows and 2 dedupe marks" in runtime.log()
