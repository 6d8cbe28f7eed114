"""The floor: ours against the least work that keeps the same promise, in the same run, under
the same load, for CPU, latency and bytes written (issue 36: every goal a ratio to it).

The floor (`bench.floor_loop`, a process of its own) is the least a device runtime can do: bare
paho with its threaded loop → one SQLite transaction per batch of inbound messages (WAL,
`synchronous=FULL`, one row inserted per message) → the answers published. For a turn it
makes the same HTTP POST our runtime makes (httpx, to the same sim cloud, the body our runtime
sent, captured here, with the turn's id and text) and publishes a `turn/response`; for a
workflow request it publishes the command of each step without dependencies; for a COMPLETED
callback those of the steps it unblocks, or one WORKFLOW_COMPLETED event after the last; for a
PUI press a `task/cancel` for every task it commanded and not seen completed, then
`pui/result`. It does not validate, keep memory, build a snapshot, report events to the cloud,
keep an outbox or checkpoint.

Both run side by side on one Mosquitto, one sim cloud (in this process: its CPU is neither's)
and the same instant device agents (one set per robot root); the load goes in `--rounds`
interleaved blocks (ours, then the floor, for each kind), so drift on the machine falls on both:

- turns: chit-chat (no workflow), one at a time, `--gap-ms` after each answer;
- callbacks: two-step workflows (step 2 depends on step 1), one at a time; the agents answer
  each command with RUNNING and COMPLETED, so a workflow is 1 request + 4 callbacks in and 2
  commands out; its CPU and bytes are divided by the 4 callbacks (the request rides along);
- presses (`--presses`): a three-step workflow whose agents hold their tasks RUNNING, then a PUI
  press (bench.cancel's), one at a time (latency only: no CPU or bytes taken).

Figures, each taken the same way for both processes:

- CPU: utime+stime from /proc/PID/stat over each turn or callback block (`SETTLE_S` after its
  last unit included), minus the process's own idle rate (measured before the load) times the
  block's length;
- bytes written to storage: `write_bytes - cancelled_write_bytes` of /proc/PID/io over the
  same blocks (bench.disk's measure), each block starting from a WAL wholly copied back and
  ending with a PASSIVE checkpoint run by the bench, whose own bytes are added (every block
  pays for copying back what it wrote), minus the idle rate measured the same way. The state
  dirs go under `--dir` (not tmpfs). The blocks run back to back at `--gap-ms`, not at
  bench.disk's paced 1.3 s: fewer checkpoints, fewer bytes per unit than its paced figure;
- PUI press → every `task/cancel` on the wire, p99: from the press handed to paho to the third
  cancel read off the wire by this process's subscriber;
- step COMPLETED → dependant command on the wire, p99: the agent's COMPLETED published to the
  next command received by it (bench.taskmanager's measure), over the callback blocks;
- the device's share of a turn, p99: the round trip (request handed to paho → answer read off
  the wire) minus the cloud's time for that turn's request as the sim cloud measures it (its
  headers read → its answer written, `took_s`), over the turn blocks.

Ours starts on an empty state dir (`--year`: on a year of history, as bench.runtime, so each
turn's snapshot has a year to choose from; the floor has no snapshot either way). Prints each
figure for both and the ratio (issue 36's goal: ours ≤ 2× the floor), records them for
bench.summary. Asserts nothing.

    .venv/bin/python -m bench.floor [--turns 600] [--workflows 300] [--presses 150] [--rounds 3]
        [--year] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from a2a_common.sqlite import open_state_db
from bench.benchlib import instant_agents, pct, record, runtime_stack, stop_all
from bench.disk import disk_fs
from bench.floor_blocks import (
    TEXTS,
    cancel_block,
    gaps,
    p99,
    turn,
    turn_block,
    workflow_block,
)
from bench.floor_meter import Meter, Store, idle
from bench.floor_wire import Wire
from bench.snapshot import fill
from bench.taskmanager import OPERATIONS
from edge.store.schema import MIGRATIONS
from sim.cloud import SimCloud

OURS = "a2a/robot-bench"
FLOOR = "a2a/robot-floor"
SETTLE_S = 1.0  # after a block's last unit: its deferred work (reap, replay) lands in it
KINDS = ("turn/response", "workflow/event", "task/callback/+", "task/cancel/+", "pui/result")


def start_floor(work: Path, port: int, cloud_url: str, template: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "bench.floor_loop", "--db", str(work / "floor.db")]
    argv += ["--port", str(port), "--root", FLOOR, "--cloud", cloud_url]
    return subprocess.Popen([*argv, "--template", str(template)])


def capture_template(wire: Wire, cloud: SimCloud, path: Path) -> list[str]:
    """One turn to ours; the body it POSTed to the cloud becomes the floor's template.
    Returns the body's keys that hold the turn's id."""
    turn_id = first_answer(wire, OURS, "warm", "our runtime")
    body = cloud.requests("/v1/a2a/turn")[-1]["body"]
    assert isinstance(body, dict)
    id_keys = [key for key, value in body.items() if value == turn_id]
    path.write_text(json.dumps({"body": body, "id_keys": id_keys}, ensure_ascii=False))
    return id_keys


def first_answer(wire: Wire, root: str, prefix: str, who: str) -> str:
    """A turn to `root`, asked again (a second each, 30 times) until answered: READY comes
    before a runtime's first SUBSCRIBE, and a fresh broker keeps nothing published before it
    (the floor's subscriptions may not be in place yet either). Returns the answered turn's id."""
    for attempt in range(30):
        turn_id = f"{prefix}-{attempt}"
        try:
            turn(wire, root, turn_id, TEXTS[0], timeout_s=1)
            return turn_id
        except TimeoutError:
            continue
    raise TimeoutError(f"{who} never answered")


def device_shares(cloud: SimCloud, id_keys: list[str], trips: dict[str, float]) -> list[float]:
    """Each turn's round trip minus the cloud's own time for its request(s), in ms."""
    cloud_s: dict[str, float] = {}
    for request in cloud.requests("/v1/a2a/turn"):
        body = request["body"]
        turn_id = next((body[k] for k in id_keys if isinstance(body, dict) and k in body), None)
        if isinstance(turn_id, str) and turn_id in trips:
            cloud_s[turn_id] = cloud_s.get(turn_id, 0.0) + float(request.get("took_s", 0.0))
    return [(trip - cloud_s.get(turn_id, 0.0)) * 1000 for turn_id, trip in trips.items()]


class Side:
    """What is measured of one process: its meters and its latencies."""

    def __init__(self, root: str, store: Store, idle_rates: tuple[float, float]) -> None:
        self.root = root
        self.turns, self.flows = Meter(store, idle_rates), Meter(store, idle_rates)
        self.trips: dict[str, float] = {}
        self.presses: list[float] = []
        self.gaps: list[float] = []
        self.device: list[float] = []


def rounds(args: argparse.Namespace, wire: Wire, sides: list[Side], agents: list[Any]) -> None:
    """The load, in interleaved blocks: ours, then the floor, for each kind, `--rounds` times."""
    turns, flows = args.turns // args.rounds, args.workflows // args.rounds
    presses = args.presses // args.rounds
    gap_s = args.gap_ms / 1000
    for r in range(args.rounds):
        for side in sides:
            work = partial(turn_block, wire, side.root, r * turns, turns, gap_s, side.trips)
            side.turns.block(work, SETTLE_S)
        first = 1000 + r * flows
        for side, agent in zip(sides, agents, strict=True):
            side.flows.block(partial(workflow_block, wire, side.root, first, flows), SETTLE_S)
            side.gaps += gaps(agent, first, flows)
        for side, agent in zip(sides, agents, strict=True):
            cancel_block(wire, agent, side.root, r * presses, presses, side.presses)
            time.sleep(SETTLE_S)  # its reports and confirmations stay out of the next block


def run(args: argparse.Namespace, work: Path) -> list[Side]:
    if args.year:
        db = open_state_db(work / "state" / "state.db", MIGRATIONS)
        fill(db)
        db.close()
    broker, cloud, runtime = runtime_stack(work)
    agents = [instant_agents(broker.port, root, *OPERATIONS) for root in (OURS, FLOOR)]
    wire = Wire(broker.port, [f"{root}/{kind}" for root in (OURS, FLOOR) for kind in KINDS])
    floor = None
    stores: list[Store] = []
    try:
        runtime.start(timeout_s=120)
        template = work / "turn.json"
        id_keys = capture_template(wire, cloud, template)
        floor = start_floor(work, broker.port, cloud.url, template)
        first_answer(wire, FLOOR, "floor-warm", "the floor process")
        assert runtime.proc is not None
        stores = [
            Store(runtime.proc.pid, work / "state" / "state.db"),
            Store(floor.pid, work / "floor.db"),
        ]
        time.sleep(1)
        rates = idle(stores, args.idle_s)
        sides = [
            Side(root, *pair)
            for root, pair in zip((OURS, FLOOR), zip(stores, rates, strict=True), strict=True)
        ]
        rounds(args, wire, sides, agents)
        for side in sides:
            side.device = device_shares(cloud, id_keys, side.trips)
    finally:
        for store in stores:
            store.close()
        if floor is not None:
            floor.kill()
            floor.wait(10)
        stop_all(wire, *agents, runtime, cloud, broker)
    return sides


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--presses", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap-ms", type=float, default=10)
    parser.add_argument("--idle-s", type=float, default=5)
    parser.add_argument("--dir", default="/var/tmp", help="where the state dirs go (a disk)")
    parser.add_argument(
        "--year", action="store_true", help="ours on a year-old cache (bench.snapshot.fill)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="a2a-floor-", dir=args.dir))
    fstype = disk_fs(work)
    if fstype in ("tmpfs", "ramfs"):
        raise SystemExit(f"{work} is on {fstype}: write_bytes would be 0; use --dir on a disk")
    try:
        sides = run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    turns = args.turns // args.rounds * args.rounds
    callbacks = args.workflows // args.rounds * args.rounds * 4
    report(sides, turns, callbacks, args.gap_ms, fstype)


def ratio(mine: float, base: float) -> float:
    return mine / base if base else float("inf")


def medians(detail: str, ours: list[float], floor: list[float]) -> str:
    return f"{detail}; p50 ours {pct(ours, 0.5):.2f} floor {pct(floor, 0.5):.2f} ms"


def report(sides: list[Side], turns: int, callbacks: int, gap_ms: float, fstype: str) -> None:
    ours, floor = sides
    print("ours vs the floor (paho -> SQLite group commit -> publish), same run, same load")
    print(f"  idle taken out       ours {100 * ours.turns.idle_cpu:.2f} % of a core,"
          f" {ours.turns.idle_bytes / 1024:.1f} KiB/s   floor {100 * floor.turns.idle_cpu:.2f} %,"
          f" {floor.turns.idle_bytes / 1024:.1f} KiB/s   (state dirs on {fstype})")  # fmt: skip
    each = f"{turns} chit-chat turns, {gap_ms:g} ms apart"
    flows = f"{callbacks // 4} two-step workflows"
    rows: list[tuple[str, str, float, float, str]] = [
        ("CPU per turn", each, ours.turns.cpu_us(turns), floor.turns.cpu_us(turns), "µs"),
        ("CPU per callback", flows, ours.flows.cpu_us(callbacks),
         floor.flows.cpu_us(callbacks), "µs"),
        ("bytes written per turn", each, ours.turns.bytes_per(turns),
         floor.turns.bytes_per(turns), "B"),
        ("bytes written per callback", flows, ours.flows.bytes_per(callbacks),
         floor.flows.bytes_per(callbacks), "B"),
        ("PUI press -> every task/cancel, p99", medians(f"{len(ours.presses)} presses",
         ours.presses, floor.presses), p99(ours.presses), p99(floor.presses), "ms"),
        ("step COMPLETED -> dependant command, p99", medians(flows, ours.gaps, floor.gaps),
         p99(ours.gaps), p99(floor.gaps), "ms"),
        ("device share of a turn, p99", medians(each, ours.device, floor.device),
         p99(ours.device), p99(floor.device), "ms"),
    ]  # fmt: skip
    for name, detail, mine, base, unit in rows:
        print(f"  {name:<42} ours {mine:9.2f} {unit:<2}  floor {base:9.2f} {unit:<2}"
              f"  ours / floor {ratio(mine, base):5.2f}   ({detail})")  # fmt: skip
    keep(rows)


KEYS = {  # row name -> (ours/floor key, ratio key)
    "CPU per turn": ("{}_cpu_us_per_turn", "ratio_per_turn"),
    "CPU per callback": ("{}_cpu_us_per_callback", "ratio_per_callback"),
    "bytes written per turn": ("{}_bytes_per_turn", "ratio_bytes_per_turn"),
    "bytes written per callback": ("{}_bytes_per_callback", "ratio_bytes_per_callback"),
    "PUI press -> every task/cancel, p99": (
        "{}_press_to_cancels_p99_ms", "ratio_press_to_cancels_p99"),
    "step COMPLETED -> dependant command, p99": (
        "{}_completed_to_command_p99_ms", "ratio_completed_to_command_p99"),
    "device share of a turn, p99": ("{}_turn_device_p99_ms", "ratio_turn_device_p99"),
}  # fmt: skip


def keep(rows: list[tuple[str, str, float, float, str]]) -> None:
    """The figures for bench.summary: ours, the floor's and the ratio of each."""
    for name, _detail, mine, base, unit in rows:
        figure, ratio_key = KEYS[name]
        digits = 2 if unit == "ms" else 0
        for who, value in (("ours", mine), ("floor", base)):
            record("floor", figure.format(who), round(value, digits) if digits else round(value))
        record("floor", ratio_key, round(ratio(mine, base), 2))


if __name__ == "__main__":
    main()
