"""The replayer in-process: a real outbox on a temp SQLite file, a scripted cloud, a recording
sink. Backoff is cut to a millisecond where a test does not measure it; nothing sleeps to wait."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.writes import SyncWrite
from cloud_client.errors import CloudBadResponse, CloudRejected, CloudUnavailable
from sync.core import Pending, Position
from sync.errors import ConflictLoop, NoProgress, SyncError
from sync.outbox import SyncOutbox
from sync.replay import MAX_CONFLICTS_IN_A_ROW, SYNC_PATH, Replayer

T = TypeVar("T")
Body = dict[str, Any]
# what the scripted cloud does with one request: an answer (status, body) or an error to raise
Answer = tuple[int, Any] | Exception
Script = Callable[[Body], Answer]
MAX_REQUESTS = 50


def acked_all(body: Body) -> Answer:
    ids = [w["write_id"] for w in body["writes"]]
    return 200, {"acked": ids, "sync": {"cursor": f"cur-{len(ids)}", "version": "v2"}}


@dataclass
class FakeCloud:
    """A `Poster`: each request is recorded, then answered by the next step of the script (the
    last step repeats). 4xx other than 409 raise CloudRejected, as the real client does. More
    than MAX_REQUESTS fail the test instead of letting a broken replayer loop for ever."""

    script: list[Script]
    requests: list[Body] = field(default_factory=list)
    on_request: Callable[[Body], None] | None = None

    async def post_json(
        self, path: str, body: Body, *, deadline_s: float, max_attempts: int = 5
    ) -> tuple[int, Any]:
        assert path == SYNC_PATH and max_attempts == 1
        assert len(self.requests) < MAX_REQUESTS, "the replayer keeps sending"
        await asyncio.sleep(0)  # a request yields to the loop, as a real one does
        self.requests.append(body)
        if self.on_request is not None:
            self.on_request(body)
        step = self.script[min(len(self.requests), len(self.script)) - 1]
        answer = step(body)
        if isinstance(answer, Exception):
            raise answer
        status, payload = answer
        if status not in (200, 201, 409):
            raise CloudRejected(status, payload)
        return status, payload

    def sent(self) -> list[list[str]]:
        """The write ids of every request, in order."""
        return [[w["write_id"] for w in body["writes"]] for body in self.requests]


@dataclass
class FakeSink:
    """A `SyncSink` that keeps what it was told."""

    position: Position = field(default_factory=lambda: Position("cur-0", "v1"))
    adopted: list[tuple[Position, bool]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    acks: list[list[str]] = field(default_factory=list)

    def sync_position(self) -> Position:
        return self.position

    def adopt_sync(self, position: Position, *, force: bool) -> None:
        self.adopted.append((position, force))
        self.position = position

    def apply_updates(self, updates: dict[str, Any]) -> None:
        self.updates.append(updates)

    def acked(self, writes: list[Pending]) -> None:
        self.acks.append([w.write_id for w in writes])

    def withheld(self, writes: list[Pending]) -> list[str]:
        return []


def answer(status: int, body: Any) -> Script:
    return lambda _body: (status, body)


def fail(error: Exception) -> Script:
    return lambda _body: error


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def queue(db: Database, outbox: SyncOutbox, n: int) -> list[str]:
    with db.atomic():
        return outbox.enqueue(
            SyncWrite("short_term_pair", {"pair_id": f"p{i}", "i": i}) for i in range(n)
        )


MakeReplayer = Callable[..., Replayer]


@pytest.fixture
def replayer(state_db: Database, clock: ManualClock, outbox: SyncOutbox) -> MakeReplayer:
    """A Replayer over this test's outbox; keyword tuning (batch_size, max_backoff_s) on top."""

    def make(cloud: FakeCloud, sink: FakeSink, **tuning: Any) -> Replayer:
        options = {"batch_size": 100, "deadline_s": 1.0, "max_backoff_s": 0.001, **tuning}
        return Replayer(
            db=state_db,
            clock=clock,
            outbox=outbox,
            poster=cloud,
            sink=sink,
            device_id="robot-t",
            **options,
        )

    return make


def dead_letters(db: Database) -> list[tuple[str, str]]:
    return [(w, r) for w, r in db.execute("SELECT write_id, reason FROM sync_dead ORDER BY 1")]


def test_an_acked_batch_leaves_the_outbox(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 3)
    in_flight: list[int] = []
    sink = FakeSink()
    cloud = FakeCloud([acked_all], on_request=lambda _b: in_flight.append(replay.in_flight))
    replay = replayer(cloud, sink)

    assert run(replay.drain()) == 3

    (body,) = cloud.requests
    assert body["device_id"] == "robot-t"
    assert body["sync"] == {"cursor": "cur-0", "version": "v1"}
    assert [w["write_id"] for w in body["writes"]] == ids
    assert [w["payload"]["i"] for w in body["writes"]] == [0, 1, 2]
    assert in_flight == [3] and replay.in_flight == 0
    assert outbox.meta("in_flight") is None  # never a row: it cost two commits a request
    assert outbox.pending() == 0 and outbox.dead_count() == 0
    assert sink.acks == [ids]
    assert sink.adopted == [(Position("cur-3", "v2"), False)]
    assert outbox.meta("last_success") is not None and outbox.meta("last_error") is None
    assert replay.acked_total == 3


def test_a_partial_ack_sends_the_rest_again(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 3)
    cloud = FakeCloud([answer(200, {"acked": ids[:2]}), acked_all])
    sink = FakeSink()

    assert run(replayer(cloud, sink).drain()) == 3

    assert cloud.sent() == [ids, ids[2:]]
    assert sink.acks == [ids[:2], ids[2:]]
    assert outbox.pending() == 0


def test_rejected_writes_are_dead_lettered_with_the_reason(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 3)
    body = {"acked": [ids[0], ids[2]], "rejected": [{"write_id": ids[1], "reason": "bad kind"}]}
    cloud = FakeCloud([answer(200, body)])
    sink = FakeSink()

    assert run(replayer(cloud, sink).drain()) == 2

    assert len(cloud.requests) == 1  # a dead letter is not sent again
    assert outbox.pending() == 0
    assert dead_letters(state_db) == [(ids[1], "bad kind")]
    assert sink.acks == [[ids[0], ids[2]]]


def test_a_version_conflict_applies_updates_forces_the_sync_and_resends(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 2)
    conflict = {
        "error": "version_conflict",
        "sync": {"cursor": "cur-server", "version": "v0"},  # lower than ours: adopted anyway
        "updates": {"deleted_profile_keys": ["k"]},
    }
    cloud = FakeCloud([answer(409, conflict), acked_all])
    sink = FakeSink()

    assert run(replayer(cloud, sink).drain()) == 2

    assert cloud.sent() == [ids, ids]  # the same batch again
    assert sink.updates == [{"deleted_profile_keys": ["k"]}]
    assert sink.adopted[0] == (Position("cur-server", "v0"), True)
    assert cloud.requests[1]["sync"] == {"cursor": "cur-server", "version": "v0"}
    assert outbox.pending() == 0


def test_conflicts_without_end_give_up_as_a_sync_error_that_is_also_unavailable(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    queue(state_db, outbox, 2)
    conflict = {"error": "version_conflict", "sync": {"cursor": "c", "version": "v"}}
    cloud = FakeCloud([answer(409, conflict)])

    with pytest.raises(ConflictLoop) as raised:
        run(replayer(cloud, FakeSink()).drain())

    assert isinstance(raised.value, SyncError) and isinstance(raised.value, CloudUnavailable)
    assert str(raised.value) == "the cloud keeps answering version_conflict"
    assert len(cloud.requests) == MAX_CONFLICTS_IN_A_ROW
    assert outbox.pending() == 2


def test_a_whole_batch_4xx_halves_down_to_the_poison_write(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 8)
    poison = ids[5]

    def cloud_answer(body: Body) -> Answer:
        if any(w["write_id"] == poison for w in body["writes"]):
            return 422, {"error": "unprocessable"}
        return acked_all(body)

    cloud = FakeCloud([cloud_answer])
    sink = FakeSink()
    replay = replayer(cloud, sink, batch_size=8)

    assert run(replay.drain()) == 7

    # 8 refused -> 4 ok, 4 refused -> 2 refused -> 1 ok, the poison alone -> dead; size resets
    assert [len(sent) for sent in cloud.sent()] == [8, 4, 4, 2, 1, 1, 2]
    assert cloud.sent()[5] == [poison]
    assert dead_letters(state_db) == [(poison, "HTTP 422: unprocessable")]
    assert [w for acks in sink.acks for w in acks] == [w for w in ids if w != poison]
    assert outbox.pending() == 0 and replay.limit == 8


def test_an_unavailable_cloud_is_retried_until_it_answers(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 2)
    cloud = FakeCloud(
        [
            fail(CloudUnavailable("no answer")),
            fail(CloudBadResponse("body is not JSON")),  # retried like a transient failure
            acked_all,
        ]
    )
    sink = FakeSink()

    assert run(replayer(cloud, sink).drain()) == 2

    assert cloud.sent() == [ids, ids, ids]
    assert sink.acks == [ids]
    assert (outbox.meta("last_error") or "").endswith("body is not JSON")
    assert outbox.pending() == 0


def test_drain_with_attempts_gives_up_and_keeps_the_writes(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 2)
    cloud = FakeCloud([fail(CloudUnavailable("cloud away"))])
    sink = FakeSink()

    with pytest.raises(CloudUnavailable, match="cloud away"):
        run(replayer(cloud, sink).drain(attempts=3))

    assert cloud.sent() == [ids, ids, ids]
    assert outbox.pending() == 2 and sink.acks == []
    assert (outbox.meta("last_error") or "").endswith("cloud away")


def test_kick_cuts_a_backoff_short(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    queue(state_db, outbox, 1)
    failed = asyncio.Event()

    def away(_body: Body) -> Answer:
        failed.set()
        return CloudUnavailable("no answer")

    cloud = FakeCloud([away, acked_all])
    # the first backoff is at least 0.5 s (multiplier 0.5, plus jitter), up to max_backoff_s
    replay = replayer(cloud, FakeSink(), max_backoff_s=60.0)

    async def go() -> tuple[int, float]:
        started = time.monotonic()
        drain = asyncio.create_task(replay.drain())
        await failed.wait()
        while not drain.done():  # the cloud is back: kick until the backoff notices
            replay.kick()
            await asyncio.sleep(0)
        return await drain, time.monotonic() - started

    sent, elapsed = run(asyncio.wait_for(go(), 10.0))

    assert sent == 1 and len(cloud.requests) == 2
    assert elapsed < 0.5, f"the kick did not cut the backoff short ({elapsed:.2f} s)"


def test_writes_notified_within_the_linger_go_in_one_request(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    """What an earlier run left goes at once; after that a notified write waits `linger_s` for
    the writes of the turns that follow, and they go in one request rather than one each."""
    left = queue(state_db, outbox, 1)
    cloud = FakeCloud([acked_all])
    replay = replayer(cloud, FakeSink(), linger_s=0.2)

    async def go() -> None:
        loop = asyncio.create_task(replay.run())
        deadline = time.monotonic() + 5
        while len(cloud.requests) < 1:  # the first wake does not linger
            assert time.monotonic() < deadline, "what an earlier run left was not sent"
            await asyncio.sleep(0.001)
        for _ in range(3):  # three turns, one after the other, each notifying
            queue(state_db, outbox, 1)
            replay.notify()
            await asyncio.sleep(0.01)
        while outbox.pending():
            assert time.monotonic() < deadline, "the notified writes were not sent"
            await asyncio.sleep(0.01)
        loop.cancel()

    run(go())

    assert cloud.sent()[0] == left
    assert [len(ids) for ids in cloud.sent()] == [1, 3]


def test_a_forget_between_tries_is_seen_by_the_next_try(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    ids = queue(state_db, outbox, 3)

    def away_then_forget(_body: Body) -> Answer:
        with state_db.atomic():  # the user forgets pair p1 while the cloud is away
            outbox.drop_memory(pairs=["p1"], sessions=[], items=[], keys=[])
        return CloudUnavailable("no answer")

    cloud = FakeCloud([away_then_forget, acked_all])
    sink = FakeSink()

    assert run(replayer(cloud, sink).drain()) == 2

    assert cloud.sent() == [ids, [ids[0], ids[2]]]
    assert sink.acks == [[ids[0], ids[2]]]
    assert outbox.pending() == 0


def settled_nothing(_body: Body) -> Answer:
    return 200, {"acked": []}


def test_an_answer_that_settles_nothing_backs_off_warns_once_and_recovers(
    state_db: Database,
    outbox: SyncOutbox,
    replayer: MakeReplayer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = queue(state_db, outbox, 2)
    stalled: list[str | None] = []
    cloud = FakeCloud(
        [settled_nothing, settled_nothing, settled_nothing, acked_all],
        on_request=lambda _b: stalled.append(outbox.meta("stalled_since")),
    )
    replay = replayer(cloud, FakeSink(), max_backoff_s=0.25)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the backoff, recorded instead of waited out
        waits.append(seconds)

    replay._sleep = sleep  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="sync.replay"):
        assert run(replay.drain()) == 2

    assert cloud.sent() == [ids] * 4
    assert len(waits) == 3 and all(0 < w <= 0.25 for w in waits), waits
    assert stalled[0] is None and stalled[1] and stalled[1] == stalled[3]  # one episode
    assert outbox.meta("stalled_since") is None
    assert "settled none of the 2 writes" in (outbox.meta("last_error") or "")
    records = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, msg in records if "no progress" in msg] == ["WARNING"]
    assert [level for level, msg in records if "progresses again" in msg] == ["INFO"]


def test_drain_with_attempts_gives_up_when_nothing_is_settled(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    queue(state_db, outbox, 2)
    cloud = FakeCloud([settled_nothing])

    with pytest.raises(NoProgress, match="settled none") as raised:
        run(replayer(cloud, FakeSink()).drain(attempts=3))

    assert isinstance(raised.value, CloudUnavailable)  # the CLI reports it as such
    assert len(cloud.requests) == 3 and outbox.pending() == 2
    assert outbox.meta("stalled_since") is not None


def test_a_redirect_is_a_stall_that_names_its_location(
    state_db: Database, outbox: SyncOutbox, replayer: MakeReplayer
) -> None:
    queue(state_db, outbox, 1)
    where = "https://elsewhere.example/v1/a2a/memory/sync"
    cloud = FakeCloud([fail(CloudRejected(301, None, location=where)), acked_all])

    assert run(replayer(cloud, FakeSink()).drain()) == 1

    assert len(cloud.requests) == 2
    assert (outbox.meta("last_error") or "").endswith(f"HTTP 301 redirect to {where}")
