"""Terminal workflow reports are on disk from the commit that ended the workflow until the cloud
took them (edge/store/reports_owed.py): delivered ones are reaped, refused ones and what a stop or a
crash left go to the sync outbox, forgotten ones are never sent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from cloud_client.errors import CloudUnavailable
from edge.store.reports import Reports
from edge.store.reports_owed import OwedReports
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox
from taskmanager.events import Report


class RecordingCloud:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.bodies: list[dict[str, Any]] = []

    async def post_json(
        self, path: str, body: dict[str, Any], *, deadline_s: float
    ) -> tuple[int, Any]:
        if self.fail:
            raise CloudUnavailable("cloud down")
        self.bodies.append(body)
        return 200, {}

    async def post_batch(self, path: str, body: dict[str, Any], *, deadline_s: float) -> int:
        """Takes every report of a batch (recorded as its single body)."""
        for entry in body["batch"]:
            await self.post_json(path, entry, deadline_s=deadline_s)
        return len(body["batch"])


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = open_state_db(tmp_path / "state.db", MIGRATIONS)
    yield database
    database.close()


def in_unit(db: Database, fn: Callable[[], object]) -> object:
    with unit_of(db):
        return fn()


def run(db: Database, reports: Reports) -> Coroutine[Any, Any, None]:
    return reports.run(apply=lambda _kind, fn: in_unit(db, fn), decide=lambda *_: None)


def reporter(db: Database, cloud: RecordingCloud) -> Reports:
    clock = ManualClock()
    sync = SyncOutbox(db=db, clock=clock)
    return Reports(
        cloud=cloud,  # type: ignore[arg-type]
        clock=clock,
        sync_outbox=sync,
        owed=OwedReports(db=db, sync_outbox=sync),
        device_id="robot-test",
        deadline_s=1.0,
        live=True,
    )


def ended(workflow_id: str) -> Report:
    body = {"workflow_id": workflow_id, "event": {"status": "WORKFLOW_COMPLETED"}}
    return Report(workflow_id, body, decision_requested=False, terminal=True)


def end(db: Database, reports: Reports, *workflow_ids: str) -> None:
    made = [ended(w) for w in workflow_ids]
    with db.atomic():
        reports.settle(made)
    reports.committed(made)


@contextmanager
def unit_of(db: Database) -> Iterator[None]:
    with db.atomic():
        yield


def rows(db: Database, table: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def drain(db: Database, reports: Reports) -> None:
    worker = asyncio.create_task(run(db, reports))
    for _ in range(100):
        if not reports.waiting:
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    worker.cancel()


def test_an_ended_workflow_is_owed_on_disk_in_its_commit(db: Database) -> None:
    reports = reporter(db, RecordingCloud())
    end(db, reports, "wf-1", "wf-2")
    assert rows(db, "reports_owed") == 2  # a power cut now: the next start replays them
    assert rows(db, "sync_outbox") == 0


def test_a_delivered_report_is_reaped_with_the_next_commit(db: Database) -> None:
    cloud = RecordingCloud()
    reports = reporter(db, cloud)
    end(db, reports, "wf-1")
    asyncio.run(drain(db, reports))
    assert [b["workflow_id"] for b in cloud.bodies] == ["wf-1"]
    assert reports.owed.reapable == 1
    assert reports.owed.reap() == 1
    assert rows(db, "reports_owed") == 0
    assert rows(db, "sync_outbox") == 0


def test_a_refused_report_moves_to_the_replay_with_its_request_id(db: Database) -> None:
    cloud = RecordingCloud(fail=True)
    reports = reporter(db, cloud)
    end(db, reports, "wf-1")
    [owed_id] = [r[0] for r in db.execute("SELECT request_id FROM reports_owed").fetchall()]
    asyncio.run(drain(db, reports))
    assert rows(db, "reports_owed") == 0
    [payload] = [r[0] for r in db.execute("SELECT payload FROM sync_outbox").fetchall()]
    assert owed_id in payload  # the same request_id: the cloud can tell a repeat


def test_what_a_crash_left_is_replayed_at_the_next_start(db: Database) -> None:
    end(db, reporter(db, RecordingCloud()), "wf-1", "wf-2")  # the process dies here
    after = reporter(db, RecordingCloud())
    assert after.recover(lambda: unit_of(db)) == 2
    assert rows(db, "reports_owed") == 0
    kinds = {r[0] for r in db.execute("SELECT kind FROM sync_outbox").fetchall()}
    assert kinds == {"task_terminal"}
    assert rows(db, "sync_outbox") == 2


def test_a_forgotten_report_is_never_sent(db: Database) -> None:
    cloud = RecordingCloud()
    reports = reporter(db, cloud)
    end(db, reports, "wf-1", "wf-2")
    with db.atomic():
        assert reports.owed.drop(["wf-1"]) == 1
    asyncio.run(drain(db, reports))
    assert [b["workflow_id"] for b in cloud.bodies] == ["wf-2"]


def test_a_stop_keeps_every_undelivered_report_once(db: Database) -> None:
    cloud = RecordingCloud()
    reports = reporter(db, cloud)
    end(db, reports, "wf-1")
    asyncio.run(drain(db, reports))  # delivered, not reaped yet
    end(db, reports, "wf-2")  # queued, never sent
    assert reports.keep_left(lambda: unit_of(db)) == 1
    payloads = [r[0] for r in db.execute("SELECT payload FROM sync_outbox").fetchall()]
    assert len(payloads) == 1 and "wf-2" in payloads[0]
    assert rows(db, "reports_owed") == 0


class HangingCloud(RecordingCloud):
    """Takes each request only once `go` is set (a cloud retried against, or slow)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.asked: list[str] = []

    async def post_json(
        self, path: str, body: dict[str, Any], *, deadline_s: float
    ) -> tuple[int, Any]:
        self.asked.append(body["workflow_id"])
        await self.go.wait()
        return await super().post_json(path, body, deadline_s=deadline_s)


def test_a_report_being_sent_when_its_workflow_is_forgotten_is_given_up(db: Database) -> None:
    """Before: the report in flight went on being retried and reached the cloud after the
    forget (outside attacker, WORKFLOW_COMPLETED of wff0 delivered 1.9 s after forget --all)."""
    cloud = HangingCloud()
    reports = reporter(db, cloud)

    async def scenario() -> None:
        worker = asyncio.create_task(run(db, reports))
        end(db, reports, "wf-1")
        while cloud.asked != ["wf-1"]:
            await asyncio.sleep(0)
        end(db, reports, "wf-2")  # waits behind the one in flight
        with db.atomic():
            reports.owed.drop(["wf-1"])
        reports.forgotten({"wf-1"})
        cloud.go.set()
        while not cloud.bodies:
            await asyncio.sleep(0)
        worker.cancel()

    asyncio.run(scenario())
    assert [b["workflow_id"] for b in cloud.bodies] == ["wf-2"]  # the worker went on


def test_an_owed_report_fits_its_leaf_and_an_older_db_keeps_its_rows(tmp_path: Path) -> None:
    """Issue 36 (edge_0010): as a WITHOUT ROWID row a report (300-400 bytes) took an overflow
    page of the 1 KiB pages, freed and zeroed a second later when delivered; a rowid row holds
    it in its leaf. A DB made before keeps what it owed, in order."""
    path = tmp_path / "state.db"
    old = open_state_db(path, MIGRATIONS[:-1])
    body = {"request_id": "01B", "workflow_id": "wf-1", "event": {"status": "COMPLETED"}}
    owed = OwedReports(db=old, sync_outbox=SyncOutbox(db=old, clock=ManualClock()))
    with old.atomic():
        owed.owe({**body, "evidence": {"arrived_room": "안방"}, "pad": "x" * 300})
        owed.owe({**body, "request_id": "01A"})
    old.close()
    db = open_state_db(path, MIGRATIONS)
    owed = OwedReports(db=db, sync_outbox=SyncOutbox(db=db, clock=ManualClock()))
    assert [h.id for h in owed.hand_out(10)] == ["01A", "01B"]
    assert owed.hand_out(10)[1].item["evidence"] == {"arrived_room": "안방"}
    with db.atomic():
        owed.owe({**body, "request_id": "01A", "again": True})  # the same id again: replaced
    assert [h.item.get("again") for h in owed.hand_out(10)] == [True, None]
    pages = db.execute(
        "SELECT pagetype, count(*) FROM dbstat WHERE name = 'reports_owed' GROUP BY pagetype"
    ).fetchall()
    assert [tuple(row) for row in pages] == [("leaf", 1)]  # no overflow page
    db.close()
