"""A cloud that answers sync requests without settling anything (issue 16, item 2): a 200
`{"acked": []}`, a 200 that is not the contract, a 301 or a 307. Before, each one made the
replayer send again at once, ~22 requests a second for as long as it lasted, with no word in
the log. Now it backs off (capped at `sync.max_backoff_s`), warns once per episode, says so in
`a2a-edge status` / `sync status`, and drains as soon as the cloud acks again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_common.clock import SystemClock
from a2a_common.sqlite import open_state_db
from a2a_common.writes import SyncWrite
from edge.config.settings import load_settings
from edge.store.schema import MIGRATIONS
from edge.views import state as views
from sim.processes import RuntimeProcess
from sync.outbox import SyncOutbox
from tests.conftest import RuntimeFactory, StateRows, eventually
from tests.reliability.sync_peer import (
    ELSEWHERE,
    Answer,
    SyncPeer,
    acked_all,
    acked_none,
    not_the_contract,
    redirect,
)

WINDOW_S = 1.5
MAX_IN_WINDOW = 3  # backoff 0.5-1 s, then 1 s: at most 2, 3 at the edges; before: ~33
STALLS: list[tuple[str, Answer, str]] = [
    ("acked nothing", acked_none, "settled none of the 1 writes"),
    ("not the contract", not_the_contract, "sync answer is not the contract: acked"),
    ("301", redirect(301), f"HTTP 301 redirect to {ELSEWHERE}"),
    ("307", redirect(307), f"HTTP 307 redirect to {ELSEWHERE}"),
]
WARNED = "sync makes no progress"
RESUMED = "sync progresses again"


def seed_writes(tmp_path: Path, n: int) -> None:
    """Writes owed before the service starts (what an earlier run left behind)."""
    db = open_state_db(tmp_path / "state" / "state.db", MIGRATIONS)
    with db.atomic():
        SyncOutbox(db=db, clock=SystemClock()).enqueue(
            SyncWrite("short_term_pair", {"pair_id": f"pair-{i}", "turn_id": f"t{i}"})
            for i in range(n)
        )
    db.close()


@pytest.fixture
def peer() -> Iterator[SyncPeer]:
    server = SyncPeer(acked_none)
    yield server
    server.close()


def in_window(peer: SyncPeer, seconds: float) -> int:
    """Requests the peer gets during the next `seconds` (a measurement: the window is the
    point, nothing is waited for)."""
    start = peer.count()
    time.sleep(seconds)
    return peer.count() - start


def lines(runtime: RuntimeProcess, text: str) -> int:
    return sum(text in line for line in runtime.log().splitlines())


def test_a_cloud_that_settles_nothing_is_backed_off_warned_and_shown(
    tmp_path: Path, runtime_factory: RuntimeFactory, peer: SyncPeer, state_rows: StateRows
) -> None:
    seed_writes(tmp_path, len(STALLS) + 3)
    peer.answer = STALLS[0][1]
    runtime = runtime_factory(
        cloud_url=peer.url, sync={"batch_size": 1, "deadline_s": 1.0, "max_backoff_s": 1.0}
    )
    settings = load_settings(runtime.config, environ={})
    eventually(lambda: peer.count() > 0, 10)
    for episode, (name, _, error) in enumerate(STALLS, start=1):
        sent = in_window(peer, WINDOW_S)  # the episode began with the answer before it
        assert sent <= MAX_IN_WINDOW, f"{name}: {sent} sync requests in {WINDOW_S:g} s"
        assert lines(runtime, WARNED) == episode, f"{name}: one warning per episode"
        status = views.status(settings)
        assert status.get("sync_stalled_since"), status
        assert error in (status["sync_last_error"] or ""), (name, status["sync_last_error"])
        sync = views.sync_status(settings)
        assert sync["stalled_since"] == status["sync_stalled_since"]
        if episode == 1:  # the service's own health says so (the next heartbeat, within 5 s)
            eventually(lambda: views.status(settings)["health"] == "degraded", 8)
        assert sync["warnings"][0].startswith("sync makes no progress since")
        # the cloud acks one write, then answers the next episode's way
        following = STALLS[episode][1] if episode < len(STALLS) else acked_all()
        peer.then(acked_all(), after=following)
        resumed = episode
        eventually(lambda: lines(runtime, RESUMED) == resumed, 10)  # noqa: B023
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)], 10)
    assert views.status(settings)["sync_stalled_since"] is None
    assert lines(runtime, WARNED) == len(STALLS)
