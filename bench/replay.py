"""Replay of queued sync writes to the sim cloud on loopback: batches of `sync.batch_size` vs.
one write per request. Prints figures; asserts nothing.

    .venv/bin/python -m bench.replay [--writes 20000] [--single 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from a2a_common.clock import SystemClock
from a2a_common.sqlite import open_state_db
from a2a_common.writes import SyncWrite
from cache.memory import Memory, MemoryPolicy
from cloud_client.client import CloudClient
from edge.app.sync_sink import MemorySyncSink
from edge.store.schema import MIGRATIONS
from sim.cloud import SimCloud
from sync.outbox import SyncOutbox
from sync.replay import Replayer


def replay(work: Path, count: int, batch_size: int) -> tuple[float, int, int]:
    """Seconds to drain `count` writes, and what the cloud applied (once each)."""
    clock = SystemClock()
    db = open_state_db(work / f"state-{batch_size}.db", MIGRATIONS, synchronous="FULL")
    outbox = SyncOutbox(db=db, clock=clock)
    with db.atomic():
        outbox.enqueue(
            SyncWrite(
                "short_term_pair",
                {
                    "pair_id": f"pair-{n:06d}",
                    "turn_id": f"turn-{n}",
                    "session_id": "session-bench",
                    "user_text": f"{n}번째: 안방으로 가서 청정해줘",
                    "assistant_text": "안방으로 이동해서 청정을 시작할게요.",
                    "route_family": "ODL",
                    "workflow_id": "",
                    "status": "ok",
                    "created_at": "2026-06-24T20:00:00.000Z",
                },
            )
            for n in range(count)
        )
    cloud = SimCloud().start()
    client = CloudClient(base_url=cloud.url)
    replayer = Replayer(
        db=db,
        clock=clock,
        outbox=outbox,
        poster=client,
        sink=MemorySyncSink(Memory(db=db, clock=clock, policy=MemoryPolicy())),
        device_id="robot-bench",
        batch_size=batch_size,
    )

    async def go() -> float:
        t0 = time.perf_counter()
        await replayer.drain(attempts=3)
        elapsed = time.perf_counter() - t0
        await client.aclose()
        return elapsed

    try:
        elapsed = asyncio.run(go())
        return elapsed, len(cloud.state.applied), cloud.state.duplicates
    finally:
        cloud.stop()
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--single", type=int, default=2000, help="writes for batch_size=1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        batched, applied, dupes = replay(Path(tmp), args.writes, args.batch_size)
        single, applied_1, _ = replay(Path(tmp), args.single, 1)
    rate, rate_1 = args.writes / batched, args.single / single
    print(f"{'replay':<22}{'writes':>8}{'drain s':>10}{'writes/s':>11}{'applied':>9}")
    print(
        f"{f'batch_size={args.batch_size}':<22}{args.writes:>8}{batched:>10.2f}{rate:>11.0f}"
        f"{applied:>9}"
    )
    print(f"{'batch_size=1':<22}{args.single:>8}{single:>10.2f}{rate_1:>11.0f}{applied_1:>9}")
    print(f"ratio batched / one-per-request: {rate / rate_1:.1f}x  (duplicates applied: {dupes})")


if __name__ == "__main__":
    main()
