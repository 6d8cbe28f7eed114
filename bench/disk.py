"""Bytes the runtime writes to its disk per turn and per callback (issue 23: the robot's flash).

Through the real runtime process on a year-old DB (`bench.snapshot.fill`), a private Mosquitto
and the sim cloud, with instant device agents: for each kind of work, the runtime's
`/proc/PID/io` is read before and after N of them, and an idle window of the same length is
subtracted (the heartbeat's and the checkpointer's own writes).

- chit-chat turns, and turns that start a two-step workflow (its four callbacks included), each
  turn once answered (and its workflow completed) before the next;
- single-step jobs on `P/workflow/request` as `bench.peers` sends them, one at a time: per job
  and per callback (two callbacks a job: RUNNING, COMPLETED).

Each kind runs twice: back to back, and paced (one every `--gap-s`, longer than the
checkpointer's one-second pass, as turns spoken by a person are): at that pace every unit's
pages are checkpointed on their own, at the back-to-back pace a checkpoint copies the pages of
dozens of them at once.

Each window starts from a WAL wholly copied back and ends with a PASSIVE checkpoint run by the
bench, whose own bytes are added: every window pays for copying back what it wrote (the
runtime's own checkpoint comes once the WAL is 4 MB: a window of a few dozen units would
otherwise hold a whole checkpoint, or none).

What is counted: `write_bytes - cancelled_write_bytes`. Linux charges `write_bytes` to the
task that dirties a clean page-cache page (4 KiB), when it dirties it — not at writeback — so
a page written and fsynced counts once per fsync, a page written twice before writeback once:
what writeback will send to the block layer. `cancelled_write_bytes` are dirty pages dropped
before writeback (a WAL trimmed by `journal_size_limit`). `wchar` (bytes passed to write
calls, sockets included) and `syscw` are printed beside it. The state dir must be on a disk
file system (tmpfs counts nothing): the bench checks it is not tmpfs. The file system's own
journal (ext4's jbd2, written by a kernel thread) is not charged to the process: the fsync
count (`--trace`) is its proxy.

`--trace` also runs a short pass of each kind under `strace` and decodes every WAL frame
header and DB page write the runtime makes (`bench/disk_trace.py`): WAL frames per commit,
which tables and indexes the pages belong to, pages checkpointed back per unit, fsyncs.

    .venv/bin/python -m bench.disk [--count 100] [--paced 20] [--trace]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from a2a_common.sqlite import open_state_db
from bench.benchlib import instant_agents, record, runtime_stack, stop_all
from bench.snapshot import fill
from edge.store.schema import MIGRATIONS
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"
EVENTS = f"{ROOT}/workflow/event"
CHAT, WORKFLOW = "오늘 날씨 어때?", "안방으로 가서 청정해줘"
SETTLE_S = 2.5  # after the last unit: its reap, sync replay and checkpoint are done by then
COUNTERS = ("write_bytes", "cancelled_write_bytes", "wchar", "syscw")


def io(pid: int) -> dict[str, int]:
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return {key: int(fields[key]) for key in COUNTERS}


def disk_fs(path: Path) -> str:
    """The file system type `path` is on (from /proc/mounts, the longest mount point)."""
    best, kind = "", "?"
    for line in Path("/proc/mounts").read_text().splitlines():
        _dev, mount, fstype, *_ = line.split()
        if str(path).startswith(mount) and len(mount) > len(best):
            best, kind = mount, fstype
    return kind


@dataclass
class Window:
    units: int
    seconds: float
    delta: dict[str, int]

    @property
    def disk(self) -> int:
        return self.delta["write_bytes"] - self.delta["cancelled_write_bytes"]


def _is(workflow_id: str, body: Any) -> bool:
    return bool(body.get("workflow_id") == workflow_id)


class Rig:
    """The stack, and the units of work the bench counts."""

    def __init__(self, work: Path) -> None:
        self.broker, self.cloud, self.runtime = runtime_stack(work)
        self.agents = instant_agents(
            self.broker.port, ROOT, "mobility.move_to_room", "air_purifier.start", "speaker.say"
        )
        self.runtime.start(timeout_s=120)
        self.probe = MqttProbe(self.broker.port, [f"{ROOT}/turn/response", EVENTS], root=ROOT)
        self.serial = 0
        # copies the window's pages back at its end, so that every window pays for the
        # checkpoint of what it wrote, whenever the runtime's own would have come
        self._copier = sqlite3.connect(work / "state" / "state.db", timeout=5)

    @property
    def pid(self) -> int:
        assert self.runtime.proc is not None
        return self.runtime.proc.pid

    def _completed(self, workflow: Callable[[Any], bool]) -> None:
        self.probe.wait_for(
            EVENTS, lambda b: b.get("status") == "WORKFLOW_COMPLETED" and workflow(b), 30
        )

    def chat(self) -> None:
        self.serial += 1
        self.probe.turn(f"c{self.serial}", CHAT)

    def workflow_turn(self) -> None:
        self.serial += 1
        answer = self.probe.turn(f"w{self.serial}", WORKFLOW)
        for workflow_id in answer.get("workflow_ids") or []:
            self._completed(partial(_is, str(workflow_id)))

    def job(self) -> None:
        self.serial += 1
        workflow_id = f"job-{self.serial:05d}"
        step = {"step_id": "say", "capability_id": "speaker", "operation_id": "say"}
        body = {
            "workflow_id": workflow_id,
            "plan_id": "bench",
            "steps": [{**step, "args": {"text": "안녕하세요"}}],
        }
        self.probe.publish(f"{ROOT}/workflow/request", body)
        self._completed(partial(_is, workflow_id))

    def copy_back(self) -> dict[str, int]:
        """A PASSIVE checkpoint from here: what this process wrote for it."""
        before = io(os.getpid())
        self._copier.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        after = io(os.getpid())
        return {k: after[k] - before[k] for k in COUNTERS}

    def measure(self, unit: Callable[[], None], count: int, gap_s: float) -> Window:
        self.copy_back()  # each window starts from a WAL wholly copied back
        before, t0 = io(self.pid), time.monotonic()
        for _ in range(count):
            unit()
            time.sleep(gap_s)
        time.sleep(SETTLE_S)
        after, copied = io(self.pid), self.copy_back()
        delta = {k: after[k] - before[k] + copied[k] for k in COUNTERS}
        return Window(count, time.monotonic() - t0, delta)

    def idle(self, seconds: float) -> Window:
        self.copy_back()
        before = io(self.pid)
        time.sleep(seconds)
        after, copied = io(self.pid), self.copy_back()
        return Window(0, seconds, {k: after[k] - before[k] + copied[k] for k in COUNTERS})

    def close(self) -> None:
        self._copier.close()
        stop_all(self.agents, self.probe, self.runtime, self.cloud, self.broker)


def net(rig: Rig, unit: Callable[[], None], count: int, gap_s: float) -> dict[str, float]:
    """Per unit: the window's counters minus an idle window of the same length."""
    busy = rig.measure(unit, count, gap_s)
    quiet = rig.idle(busy.seconds)
    per = {k: (busy.delta[k] - quiet.delta[k]) / count for k in COUNTERS}
    per["disk"] = (busy.disk - quiet.disk) / count
    per["idle_disk_per_s"] = quiet.disk / quiet.seconds
    return per


KINDS: dict[str, tuple[str, int]] = {  # name -> (what is printed, callbacks per unit)
    "chat": ("chit-chat turn", 0),
    "workflow_turn": ("turn starting a 2-step workflow (4 callbacks)", 4),
    "job": ("single-step job (2 callbacks)", 2),
}


def row(label: str, per: dict[str, float], callbacks: int) -> None:
    cb = f"  {per['disk'] / callbacks / 1024:6.1f} KiB/callback" if callbacks else " " * 21
    print(
        f"  {label:<54} {per['disk'] / 1024:7.1f} KiB{cb}   wchar {per['wchar'] / 1024:6.1f} KiB"
        f"  syscw {per['syscw']:5.1f}"
    )


def fresh_state(work: Path, page_size: int) -> None:
    path = work / "state" / "state.db"
    if page_size:  # an experiment: the DB made with another page size
        path.parent.mkdir(mode=0o700)
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA page_size={page_size}")
        conn.execute("VACUUM")
        conn.close()
    db = open_state_db(path, MIGRATIONS)
    fill(db)  # a year of history: 20,000 pairs, 365 days, 52 weeks, 500 profile items
    db.close()


def run(args: argparse.Namespace, work: Path) -> tuple[Window, dict[Any, Any], str | None]:
    fresh_state(work, args.page_size)
    rig = Rig(work)
    try:
        for warm in (rig.chat, rig.workflow_turn, rig.job):  # first-use pages, first session
            warm()
        time.sleep(SETTLE_S)
        idle = rig.idle(10.0)
        results = {
            (name, pace): net(rig, getattr(rig, name), n, gap)
            for pace, n, gap in paces(args)
            for name in KINDS
        }
        traced = trace_pass(rig, work) if args.trace else None
    finally:
        rig.close()
    return idle, results, traced


def paces(args: argparse.Namespace) -> list[tuple[str, int, float]]:
    return [("back to back", args.count, 0.0), ("paced", args.paced, args.gap_s)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100, help="units back to back per kind")
    parser.add_argument("--paced", type=int, default=20, help="paced units per kind")
    parser.add_argument("--gap-s", type=float, default=1.3, help="pause after each paced unit")
    parser.add_argument("--dir", default="/var/tmp", help="where the state dir goes (a disk)")
    parser.add_argument("--page-size", type=int, default=0, help="make the DB with this page size")
    parser.add_argument("--trace", action="store_true", help="also decode writes with strace")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="a2a-disk-", dir=args.dir))
    fstype = disk_fs(work)
    if fstype in ("tmpfs", "ramfs"):
        raise SystemExit(f"{work} is on {fstype}: write_bytes would be 0; use --dir on a disk")
    try:
        idle, results, traced = run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"bytes written per unit of work, year-old DB on {fstype} ({work.parent})")
    print("  disk = write_bytes - cancelled_write_bytes of the runtime, minus an idle window")
    print(f"  idle: {idle.disk / idle.seconds / 1024:.1f} KiB/s to disk (heartbeat, checkpoints)")
    for pace, n, gap in paces(args):
        print(f"{pace}: {n} of each" + (f", {gap:g} s after each" if gap else ""))
        for name, (label, callbacks) in KINDS.items():
            row(label, results[(name, pace)], callbacks)
    if traced is not None:
        print(traced)
    keep(results)


def keep(results: dict[Any, Any]) -> None:
    """The key figures for `bench.summary`: a spoken turn's pace, and back to back."""
    for pace, suffix in (("paced", ""), ("back to back", "_back_to_back")):
        record("disk", f"bytes_per_turn{suffix}", round(results[("chat", pace)]["disk"]))
        job = results[("job", pace)]["disk"]
        record("disk", f"bytes_per_callback{suffix}", round(job / KINDS["job"][1]))


def trace_pass(rig: Rig, work: Path) -> str:
    from bench.disk_trace import traced_report

    return traced_report(rig, work, {name: getattr(rig, name) for name in KINDS})


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
