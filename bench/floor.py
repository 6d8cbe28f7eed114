"""CPU per turn and per callback, ours against a floor, in the same run under the same load.

The floor (`bench.floor_loop`, a process of its own) is the least a device runtime can do: bare
paho with its threaded loop → one SQLite transaction per batch of inbound messages (WAL,
`synchronous=FULL`, one row inserted per message) → the answers published. For a turn it
makes the same HTTP POST our runtime makes (httpx, to the same sim cloud, the body our runtime
sent, captured here, with the turn's id and text) and publishes a `turn/response`; for a
workflow request it publishes the first step's command; for a COMPLETED callback the next
step's command, or one WORKFLOW_COMPLETED event after the last step. It does not validate,
keep memory, build a snapshot, report events to the cloud, keep an outbox or checkpoint.

Both run side by side on one Mosquitto, one sim cloud (in this process: its CPU is neither's)
and the same instant device agents; the load goes in `--rounds` interleaved blocks (ours, then
the floor), so drift on the machine falls on both:

- turns: chit-chat (no workflow), one at a time, `--gap-ms` after each answer;
- callbacks: two-step workflows (step 2 depends on step 1), one at a time; the agents answer
  each command with RUNNING and COMPLETED, so a workflow is 1 request + 4 callbacks in and 2
  commands out; its CPU is divided by the 4 callbacks (the request rides along on both sides).

CPU is utime+stime from /proc/PID/stat over each block (0.5 s of settling included), minus the
process's own idle rate (measured before the load) times the block's length. Ours starts on an
empty state dir (`--year`: on a year of history, as bench.runtime, so each turn's snapshot has
a year to choose from; the floor has no snapshot either way). Prints CPU-µs per turn and per
callback and the ratios (goal: ours ≤ 3× the floor). Asserts nothing.

    .venv/bin/python -m bench.floor [--turns 600] [--workflows 300] [--rounds 3] [--year]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from a2a_common.sqlite import open_state_db
from bench.benchlib import instant_agents, proc_stat, record, runtime_stack, stop_all
from bench.snapshot import fill
from bench.taskmanager import OPERATIONS, two_step
from edge.store.schema import MIGRATIONS
from sim.probe import MqttProbe

OURS = "a2a/robot-bench"
FLOOR = "a2a/robot-floor"
TEXTS = ("오늘 날씨 어때?", "안녕")
SETTLE_S = 0.5


def cpu(pid: int) -> float:
    return proc_stat(pid)[1]


def turn_block(probe: MqttProbe, root: str, first: int, count: int, gap_s: float) -> None:
    probe.root = root
    for n in range(first, first + count):
        probe.turn(f"{root[-5:]}-t{n}", TEXTS[n % 2], timeout_s=30)
        time.sleep(gap_s)


def completed(workflow_id: str, body: dict[str, object]) -> bool:
    return body.get("workflow_id") == workflow_id and body.get("status") == "WORKFLOW_COMPLETED"


def workflow_block(probe: MqttProbe, root: str, first: int, count: int) -> None:
    for n in range(first, first + count):
        probe.publish(f"{root}/workflow/request", two_step(n))
        probe.wait_for(f"{root}/workflow/event", partial(completed, f"wf-{n:05d}"), timeout_s=30)


class Meter:
    """CPU seconds and wall seconds of one process, summed over its blocks."""

    def __init__(self, pid: int, idle_rate: float) -> None:
        self.pid, self.idle_rate = pid, idle_rate
        self.cpu_s = self.wall_s = 0.0

    def block(self, work: Callable[[], None]) -> None:
        c0, t0 = cpu(self.pid), time.monotonic()
        work()
        time.sleep(SETTLE_S)
        self.cpu_s += cpu(self.pid) - c0
        self.wall_s += time.monotonic() - t0

    def per(self, count: int) -> float:
        """CPU-µs per operation, idle taken out."""
        return max(0.0, self.cpu_s - self.idle_rate * self.wall_s) / count * 1e6


def idle_rates(pids: list[int], seconds: float) -> list[float]:
    before = [cpu(p) for p in pids]
    time.sleep(seconds)
    return [(cpu(p) - b) / seconds for p, b in zip(pids, before, strict=True)]


def start_floor(work: Path, port: int, cloud_url: str, template: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "bench.floor_loop", "--db", str(work / "floor.db")]
    argv += ["--port", str(port), "--root", FLOOR, "--cloud", cloud_url]
    return subprocess.Popen([*argv, "--template", str(template)])


def capture_template(
    probe: MqttProbe, cloud_requests: Callable[[], list[dict[str, object]]], path: Path
) -> None:
    """One turn to ours; the body it POSTed to the cloud becomes the floor's template."""
    turn_id = first_answer(probe, OURS, "warm", "our runtime")
    body = cloud_requests()[-1]["body"]
    assert isinstance(body, dict)
    id_keys = [key for key, value in body.items() if value == turn_id]
    path.write_text(json.dumps({"body": body, "id_keys": id_keys}, ensure_ascii=False))


def wait_floor(probe: MqttProbe) -> None:
    first_answer(probe, FLOOR, "floor-warm", "the floor process")


def first_answer(probe: MqttProbe, root: str, prefix: str, who: str) -> str:
    """A turn to `root`, asked again (a second each, 30 times) until answered: READY comes
    before a runtime's first SUBSCRIBE, and a fresh broker keeps nothing published before it
    (the floor's subscriptions may not be in place yet either). Returns the answered turn's id."""
    probe.root = root
    for attempt in range(30):
        turn_id = f"{prefix}-{attempt}"
        try:
            probe.turn(turn_id, TEXTS[0], timeout_s=1)
            return turn_id
        except TimeoutError:
            continue
    raise TimeoutError(f"{who} never answered")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap-ms", type=float, default=10)
    parser.add_argument("--idle-s", type=float, default=5)
    parser.add_argument(
        "--year", action="store_true", help="ours on a year-old cache (bench.snapshot.fill)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.year:
            db = open_state_db(work / "state" / "state.db", MIGRATIONS)
            fill(db)
            db.close()
        broker, cloud, runtime = runtime_stack(work)
        agents = [instant_agents(broker.port, root, *OPERATIONS) for root in (OURS, FLOOR)]
        topics = [f"{root}/{kind}" for root in (OURS, FLOOR)
                  for kind in ("turn/response", "workflow/event")]  # fmt: skip
        probe = MqttProbe(broker.port, topics)
        floor = None
        try:
            runtime.start(timeout_s=120)
            template = work / "turn.json"
            capture_template(probe, lambda: cloud.requests("/v1/a2a/turn"), template)
            floor = start_floor(work, broker.port, cloud.url, template)
            wait_floor(probe)
            assert runtime.proc is not None
            pids = [runtime.proc.pid, floor.pid]
            time.sleep(1)
            meters = [
                (Meter(pid, rate), Meter(pid, rate))  # (turns, callbacks)
                for pid, rate in zip(pids, idle_rates(pids, args.idle_s), strict=True)
            ]
            turns, flows = args.turns // args.rounds, args.workflows // args.rounds
            gap_s = args.gap_ms / 1000
            for r in range(args.rounds):
                for (turn_meter, _), root in zip(meters, (OURS, FLOOR), strict=True):
                    turn_meter.block(partial(turn_block, probe, root, r * turns, turns, gap_s))
                for (_, flow_meter), root in zip(meters, (OURS, FLOOR), strict=True):
                    flow_meter.block(partial(workflow_block, probe, root, 1000 + r * flows, flows))
        finally:
            if floor is not None:
                floor.kill()
                floor.wait(10)
            stop_all(probe, *agents, runtime, cloud, broker)
    report(meters, turns * args.rounds, flows * args.rounds * 4, args.gap_ms)


def report(meters: list[tuple[Meter, Meter]], turns: int, callbacks: int, gap_ms: float) -> None:
    (ours_t, ours_c), (floor_t, floor_c) = meters
    print("CPU per operation, ours vs the floor (paho -> SQLite group commit -> publish)")
    print(f"  idle CPU taken out (% of a core)   ours {100 * ours_t.idle_rate:.2f}"
          f"  floor {100 * floor_t.idle_rate:.2f}")  # fmt: skip
    rows = [
        (f"per turn ({turns} chit-chat turns, {gap_ms:g} ms apart)", ours_t, floor_t, turns),
        (f"per callback ({callbacks // 4} two-step workflows)", ours_c, floor_c, callbacks),
    ]
    for name, ours, floor, count in rows:
        mine, base = ours.per(count), floor.per(count)
        ratio = mine / base if base else float("inf")
        print(f"  {name:<44} ours {mine:8.0f} µs  floor {base:7.0f} µs  ours / floor {ratio:5.2f}")
        key = "turn" if "turn" in name else "callback"
        record("floor", f"ours_cpu_us_per_{key}", round(mine))
        record("floor", f"floor_cpu_us_per_{key}", round(base))
        record("floor", f"ratio_per_{key}", round(ratio, 2))


if __name__ == "__main__":
    main()
