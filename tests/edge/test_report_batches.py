"""Terminal reports several in one request (SPEC §3.3's batch form, edge/store/report_batches.py):
the report worker over a real `CloudClient`, the cloud an `httpx.MockTransport` that dedupes by
`request_id`. What waits when a send starts goes together (waiting for more only with
`linger_s`, ended by a decision report), a decision
report goes alone, a cloud that refuses the form gets single events until a restart, a partly
taken batch loses nothing."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from cloud_client.client import CloudClient
from edge.store.report_batches import BATCH_MAX
from edge.store.reports import Reports
from edge.store.reports_owed import OwedReports
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox
from taskmanager.events import Report


class Cloud:
    """Takes each report once by `request_id`; answers held while `open` is not set (and
    batches' while `batches_open` is not)."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.taken: dict[str, int] = {}
        self.refuse: int | None = None  # a batch is answered this
        self.accept_max: int | None = None
        self.batch_status: int | None = None  # a batch is answered this error
        self.open = asyncio.Event()
        self.batches_open = asyncio.Event()
        self.open.set()
        self.batches_open.set()

    def take(self, request_id: str) -> None:
        self.taken[request_id] = self.taken.get(request_id, 0) + 1

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.posts.append(body)
        await self.open.wait()
        if "batch" not in body:
            self.take(body["request_id"])
            return httpx.Response(200, json={"decision": None})
        await self.batches_open.wait()
        if self.refuse is not None:
            return httpx.Response(self.refuse, json={"error": "no batches"})
        if self.batch_status is not None:
            return httpx.Response(self.batch_status, json={"error": "unprocessable"})
        entries = body["batch"]
        accepted = len(entries) if self.accept_max is None else self.accept_max
        for entry in entries[:accepted]:
            self.take(entry["request_id"])
        return httpx.Response(200, json={"accepted": accepted})

    def sizes(self) -> list[int]:
        """Reports per request, in order (a single event is 1)."""
        return [len(p["batch"]) if "batch" in p else 1 for p in self.posts]

    def workflows(self) -> list[str]:
        """Workflow ids in the order the cloud received them."""
        return [e["workflow_id"] for p in self.posts for e in p.get("batch", [p])]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = open_state_db(tmp_path / "state.db", MIGRATIONS)
    yield database
    database.close()


@pytest.fixture
def cloud() -> Cloud:
    return Cloud()


def reporter(db: Database, cloud: Cloud, linger_s: float = 0.0) -> Reports:
    clock = ManualClock()
    sync = SyncOutbox(db=db, clock=clock)
    client = CloudClient(base_url="http://cloud.test", transport=httpx.MockTransport(cloud.handle))
    return Reports(
        cloud=client,
        clock=clock,
        sync_outbox=sync,
        owed=OwedReports(db=db, sync_outbox=sync),
        device_id="robot-test",
        deadline_s=5.0,
        live=True,
        linger_s=linger_s,
    )


def report(workflow_id: str, *, decision: bool = False) -> Report:
    status = "FAILED" if decision else "WORKFLOW_COMPLETED"
    body = {
        "workflow_id": workflow_id,
        "experience_id": None,
        "event": {"status": status},
        "workflow": {"status": "completed", "etag": 3},
        "decision_requested": decision,
    }
    return Report(workflow_id, body, decision_requested=decision, terminal=True)


def end(db: Database, reports: Reports, *made: Report) -> None:
    """Reports of one commit, as the publisher settles them."""
    with db.atomic():
        reports.settle(list(made))
    reports.committed(list(made))


def ended(db: Database, reports: Reports, *workflow_ids: str) -> None:
    end(db, reports, *(report(w) for w in workflow_ids))


def owed_ids(db: Database) -> list[str]:
    return [r[0] for r in db.execute("SELECT request_id FROM reports_owed ORDER BY 1").fetchall()]


def replayed(db: Database) -> list[str]:
    """`request_id`s of the `task_terminal` writes the sync outbox holds."""
    rows = db.execute("SELECT kind, payload FROM sync_outbox").fetchall()
    assert {kind for kind, _ in rows} <= {"task_terminal"}
    return sorted(json.loads(payload)["request_id"] for _, payload in rows)


async def until(ok: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)


def worker(db: Database, reports: Reports) -> asyncio.Task[None]:
    def apply(_kind: str, fn: Callable[[], object]) -> object:
        with db.atomic():
            return fn()

    return asyncio.create_task(reports.run(apply=apply, decide=lambda *_: None))


async def one_in_flight_then(db: Database, reports: Reports, cloud: Cloud, *made: Report) -> None:
    """wf-00's report goes alone and is held; `made` are committed meanwhile; then the cloud
    answers, and the worker sends what waits."""
    cloud.open.clear()
    running = worker(db, reports)
    ended(db, reports, "wf-00")
    await until(lambda: len(cloud.posts) == 1)
    end(db, reports, *made)
    cloud.open.set()
    await until(lambda: reports.idle)
    running.cancel()


def many(n: int, start: int = 1) -> list[Report]:
    return [report(f"wf-{i:02d}") for i in range(start, start + n)]


def test_reports_waiting_when_a_send_starts_go_in_one_request(db: Database, cloud: Cloud) -> None:
    reports = reporter(db, cloud)
    asyncio.run(one_in_flight_then(db, reports, cloud, *many(20)))
    assert cloud.sizes() == [1, 20]  # 21 reports in 2 requests
    assert sorted(cloud.taken) == owed_ids(db)  # each report's own request_id, on disk till reaped
    assert set(cloud.taken.values()) == {1}
    assert cloud.workflows() == [f"wf-{i:02d}" for i in range(21)]  # in commit order
    [batch] = [p for p in cloud.posts if "batch" in p]
    assert batch["device_id"] == "robot-test" and batch["request_id"] not in cloud.taken
    assert set(batch["batch"][0]) == {
        "request_id",
        "workflow_id",
        "experience_id",
        "event",
        "workflow",
    }
    assert reports.owed.reap() == 21 and owed_ids(db) == [] and replayed(db) == []


def test_a_report_alone_goes_at_once_in_the_single_form(db: Database, cloud: Cloud) -> None:
    reports = reporter(db, cloud)

    async def scenario() -> None:
        running = worker(db, reports)
        ended(db, reports, "wf-1")
        await until(lambda: reports.idle and bool(cloud.taken))
        running.cancel()

    asyncio.run(scenario())
    [single] = cloud.posts
    assert single["workflow_id"] == "wf-1" and "batch" not in single
    assert single["decision_requested"] is False


def test_terminal_reports_ending_within_the_linger_share_one_request(
    db: Database, cloud: Cloud
) -> None:
    """With `linger_s`, workflows ending one after another (nothing in flight) are one request;
    a decision report ends the wait at once and still goes alone, in its place."""
    reports = reporter(db, cloud, linger_s=30.0)

    async def scenario() -> float:
        running = worker(db, reports)
        for workflow_id in ("wf-01", "wf-02", "wf-03"):
            ended(db, reports, workflow_id)
            await asyncio.sleep(0.01)
        assert cloud.posts == []  # lingering for more
        started = time.monotonic()
        end(db, reports, report("wf-04", decision=True))
        await until(lambda: reports.idle and len(cloud.taken) == 4)
        running.cancel()
        return time.monotonic() - started

    waited = asyncio.run(scenario())
    assert waited < 5.0, "the decision report waited out the linger"
    assert cloud.sizes() == [3, 1]
    assert cloud.workflows() == ["wf-01", "wf-02", "wf-03", "wf-04"]
    assert cloud.posts[1]["decision_requested"] is True


def test_a_batch_holds_at_most_batch_max_reports(db: Database, cloud: Cloud) -> None:
    reports = reporter(db, cloud)
    asyncio.run(one_in_flight_then(db, reports, cloud, *many(2 * BATCH_MAX + 6)))
    assert cloud.sizes() == [1, BATCH_MAX, BATCH_MAX, 6]
    assert len(cloud.taken) == 2 * BATCH_MAX + 7 and set(cloud.taken.values()) == {1}


def test_a_decision_report_goes_alone_and_keeps_its_place(db: Database, cloud: Cloud) -> None:
    reports = reporter(db, cloud)
    made = [report("wf-01"), report("wf-02"), report("wf-03", decision=True), report("wf-04")]
    asyncio.run(one_in_flight_then(db, reports, cloud, *made))
    assert cloud.sizes() == [1, 2, 1, 1]
    assert cloud.workflows() == ["wf-00", "wf-01", "wf-02", "wf-03", "wf-04"]
    assert cloud.posts[2]["decision_requested"] is True


@pytest.mark.parametrize("status", [404, 400])
def test_a_cloud_refusing_the_batch_form_gets_single_events_until_a_restart(
    db: Database, cloud: Cloud, status: int
) -> None:
    cloud.refuse = status
    reports = reporter(db, cloud)
    asyncio.run(one_in_flight_then(db, reports, cloud, *many(5)))
    assert cloud.sizes() == [1, 5, 1, 1, 1, 1, 1]  # the refused batch, then each alone
    assert reports.batches is False
    assert len(cloud.taken) == 6 and set(cloud.taken.values()) == {1}
    assert replayed(db) == []  # none went to the replay: each was delivered
    cloud.posts.clear()
    asyncio.run(one_in_flight_then(db, reports, cloud, *many(3, start=10)))
    assert cloud.sizes() == [1, 1, 1, 1]  # remembered: no batch tried again
    assert reporter(db, cloud).batches is True  # a restart tries the form again


def test_a_partly_taken_batch_sends_the_rest_through_the_replay(db: Database, cloud: Cloud) -> None:
    """SPEC is silent on `accepted` < sent: the first `accepted` are taken, in order; the rest
    go to the replay as `task_terminal` writes with their own request_id (never lost, never
    sent again at once to a cloud that just declined them)."""
    cloud.accept_max = 2
    reports = reporter(db, cloud)
    asyncio.run(one_in_flight_then(db, reports, cloud, *many(5)))
    [batch] = [p for p in cloud.posts if "batch" in p]
    ids = [e["request_id"] for e in batch["batch"]]
    assert sorted(cloud.taken) == sorted([*ids[:2], cloud.posts[0]["request_id"]])
    assert replayed(db) == sorted(ids[2:])
    reports.owed.reap()  # the replay's move reaped the delivered ones already
    assert owed_ids(db) == []
    assert reports.batches is True  # the form works: a part is not a refusal


def test_a_batch_the_cloud_does_not_take_goes_whole_to_the_replay(
    db: Database, cloud: Cloud
) -> None:
    cloud.batch_status = 422
    reports = reporter(db, cloud)
    asyncio.run(one_in_flight_then(db, reports, cloud, *many(4)))
    [batch] = [p for p in cloud.posts if "batch" in p]
    assert replayed(db) == sorted(e["request_id"] for e in batch["batch"])
    assert reports.batches is True


def test_a_forget_during_a_batch_gives_up_its_report_and_sends_the_others(
    db: Database, cloud: Cloud
) -> None:
    reports = reporter(db, cloud)

    async def scenario() -> None:
        cloud.open.clear()
        cloud.batches_open.clear()
        running = worker(db, reports)
        ended(db, reports, "wf-00")
        await until(lambda: len(cloud.posts) == 1)
        ended(db, reports, "wf-01", "wf-02", "wf-03")
        cloud.open.set()
        await until(lambda: len(cloud.posts) == 2)  # the batch, held
        with db.atomic():
            reports.owed.drop(["wf-02"])
        reports.forgotten({"wf-02"})
        cloud.batches_open.set()
        await until(lambda: reports.idle and len(cloud.posts) == 3)
        running.cancel()

    asyncio.run(scenario())
    assert cloud.sizes() == [1, 3, 2]
    assert [e["workflow_id"] for e in cloud.posts[2]["batch"]] == ["wf-01", "wf-03"]
    taken = {
        e["workflow_id"]
        for p in cloud.posts
        for e in p.get("batch", [p])
        if e["request_id"] in cloud.taken
    }
    assert taken == {"wf-00", "wf-01", "wf-03"}
