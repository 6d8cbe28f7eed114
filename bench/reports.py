"""Terminal workflow reports (SPEC §3.3): requests, SQL statements and bytes written per report,
one report per request (before issue 36) against the batch form (after), and against a cloud
that refuses batches (the fallback: one refused batch, then single events). Prints figures;
asserts nothing.

The report worker (`edge.store.reports.Reports`) runs in this process over a real state DB
(WAL, `synchronous=FULL`, on the disk of `--dir`) and a real `CloudClient` to the sim cloud on
loopback. Each round, `--workflows` workflows end one commit each (its step's COMPLETED and its
WORKFLOW_COMPLETED, as a one-step workflow's end settles them: the `reports_owed` rows in that
commit), back to back, while the worker sends; once it is idle, one commit deletes the
delivered rows (the service does it with its next commit). Statements: every SQL statement
the connection ran (`set_trace_callback`), writes (INSERT/UPDATE/DELETE) apart; bytes written:
`/proc/self/io` `write_bytes` (the DB and its WAL: the sim cloud writes nothing to disk).

    .venv/bin/python -m bench.reports [--workflows 20] [--rounds 10] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from a2a_common.clock import SystemClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from cloud_client.client import CloudClient
from edge.store.reports import EVENTS_PATH, Reports
from edge.store.reports_owed import OwedReports
from edge.store.schema import MIGRATIONS
from sim.cloud import SimCloud
from sync.outbox import SyncOutbox
from taskmanager import Report

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
MODES = {"single": "one per request (before)", "batch": "batched (after)", "refused": "fallback"}


@dataclass
class Figures:
    reports: int = 0
    requests: int = 0
    wire_bytes: int = 0
    statements: int = 0
    writes: int = 0
    commits: int = 0
    written: int = 0
    seconds: float = 0.0


def write_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def ended(n: int) -> list[Report]:
    """A one-step workflow's end: the step's COMPLETED, then WORKFLOW_COMPLETED."""
    workflow = {"status": "completed", "etag": 4, "completed_step_ids": ["say"]}
    workflow |= {"decisions_used": 0, "replans_used": 0}
    out = []
    for event in (
        {"task_id": f"wf-{n:05d}:say", "step_id": "say", "status": "COMPLETED",
         "evidence": {"spoken": True}},
        {"status": "WORKFLOW_COMPLETED", "reason": None},
    ):  # fmt: skip
        body = {
            "workflow_id": f"wf-{n:05d}",
            "experience_id": None,
            "event": {k: v for k, v in event.items() if v is not None},
            "workflow": workflow,
            "decision_requested": False,
        }
        out.append(Report(f"wf-{n:05d}", body, decision_requested=False, terminal=True))
    return out


async def rounds(db: Database, reports: Reports, count: int, times: int, figures: Figures) -> None:
    def apply(_kind: str, fn: Callable[[], object]) -> object:
        with db.atomic():
            return fn()

    worker = asyncio.create_task(reports.run(apply=apply, decide=lambda *_: None))
    n = 0
    for _ in range(times):
        for _ in range(count):
            made = ended(n)
            n += 1
            with db.atomic():
                reports.settle(made)
            reports.committed(made)
            figures.commits += 1
        deadline = time.monotonic() + 60
        while not (
            reports.idle
            and reports.owed.reapable + reports.owed.sync.pending() >= len(made) * count
        ):
            assert time.monotonic() < deadline, "the worker did not finish the round"
            await asyncio.sleep(0.001)
        with db.atomic():  # the service's next commit
            reports.owed.reap()
        figures.commits += 1
    worker.cancel()
    figures.reports = 2 * n


def measure(mode: str, work: Path, count: int, times: int) -> Figures:
    cloud = SimCloud().start()
    if mode == "refused":
        cloud.batch_faults(refuse=404)
    db = open_state_db(work / f"reports-{mode}.db", MIGRATIONS, synchronous="FULL")
    clock = SystemClock()
    sync = SyncOutbox(db=db, clock=clock)
    reports = Reports(
        cloud=CloudClient(base_url=cloud.url),
        clock=clock,
        sync_outbox=sync,
        owed=OwedReports(db=db, sync_outbox=sync),
        device_id="robot-bench",
        deadline_s=10.0,
        live=True,
        batch=mode != "single",
    )
    figures = Figures()

    def traced(sql: str) -> None:
        figures.statements += 1
        figures.writes += sql.lstrip().upper().startswith(WRITES)

    db.conn.set_trace_callback(traced)
    before, started = write_bytes(), time.perf_counter()
    asyncio.run(rounds(db, reports, count, times, figures))
    figures.seconds = time.perf_counter() - started
    figures.written = write_bytes() - before
    db.conn.set_trace_callback(None)
    posts = cloud.posts(EVENTS_PATH)
    figures.requests, figures.wire_bytes = len(posts), sum(p["bytes"] for p in posts)
    assert len(cloud.reports()) == figures.reports, "a report did not reach the cloud"
    assert sync.pending() == 0, "a report went to the replay"
    db.close()
    cloud.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=20, help="ending per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None, help="where the DBs go (a real disk)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir or Path.cwd()) as tmp:
        results = {m: measure(m, Path(tmp), args.workflows, args.rounds) for m in MODES}
    print(
        f"{args.rounds} rounds of {args.workflows} workflows ending back to back (2 reports each)"
    )
    print(f"{'per report':<28}" + "".join(f"{MODES[m]:>26}" for m in MODES))
    rows = [
        ("requests", lambda f: f.requests / f.reports),
        ("request body bytes", lambda f: f.wire_bytes / f.reports),
        ("SQL statements", lambda f: f.statements / f.reports),
        ("  of which writes", lambda f: f.writes / f.reports),
        ("bytes written (disk)", lambda f: f.written / f.reports),
        ("ms (wall, loopback)", lambda f: 1000 * f.seconds / f.reports),
    ]
    for label, per in rows:
        print(f"{label:<28}" + "".join(f"{per(results[m]):>26.2f}" for m in MODES))


if __name__ == "__main__":
    main()
