"""A fleet in simulation: N runtimes (separate processes, separate state dirs) against one
Mosquitto and one sim cloud process on this machine, under mixed load: turns (chit-chat, room
moves with purification, stops), PUI cancels, and one cloud outage in the middle that the
outboxes ride out and replay. Prints per-runtime RSS and CPU, the broker's message rate, turn
latency, and every error seen. Asserts nothing.

    .venv/bin/python -m bench.fleet [--robots 50] [--seconds 300]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import paho.mqtt.client as paho

from bench.benchlib import pct, proc_stat, record
from bench.fleet_agents import AgentHosts
from sim.broker import Mosquitto, free_port, wait_port
from sim.mqttc import start_client
from sim.processes import RuntimeProcess, write_config

SYS_INTERVAL_S = 2
READY_S = 120  # one runtime's start while a wave of others starts too
UTTERANCES = [
    ("오늘 날씨 어때?", 4),
    ("안녕", 2),
    ("안방으로 가서 청정해줘", 2),
    ("거실 청정해줘", 2),
    ("작은방으로 이동해", 1),
    ("청정 멈춰", 1),
    ("충전하러 가", 1),
]


@dataclass
class Observed:
    """What the fleet driver saw on the broker (its paho thread writes, the main thread reads)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: dict[str, float] = field(default_factory=dict)  # turn_id -> monotonic publish time
    took_ms: dict[str, list[float]] = field(default_factory=dict)  # by answer status
    runtime_errors: list[str] = field(default_factory=list)
    workflow_events: dict[str, int] = field(default_factory=dict)
    broker_counts: dict[str, int] = field(default_factory=dict)

    def broker_snapshot(self) -> tuple[float, dict[str, int]]:
        with self.lock:
            return time.monotonic(), dict(self.broker_counts)

    def on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        now = time.monotonic()
        topic = msg.topic
        if topic.startswith("$SYS/broker/"):
            with self.lock:  # counters since the broker started, every sys_interval
                self.broker_counts[topic.split("/", 2)[2]] = int(msg.payload)
            return
        try:
            body = json.loads(msg.payload)
        except ValueError:
            body = {}
        with self.lock:
            if topic.endswith("/turn/response"):
                status = str(body.get("status"))
                start = self.sent.pop(str(body.get("turn_id")), None)
                if start is not None:
                    self.took_ms.setdefault(status, []).append((now - start) * 1000)
            elif topic.endswith("/runtime/error"):
                self.runtime_errors.append(f"{topic}: {body.get('error')} {body.get('detail')}")
            elif topic.endswith("/workflow/event"):
                status = str(body.get("status"))
                self.workflow_events[status] = self.workflow_events.get(status, 0) + 1


def start_cloud(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The sim cloud in a process of its own (its GIL is not the driver's)."""
    port = free_port()
    log = (work / "cloud.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge", "sim", "cloud", "--port", str(port)],
        stdout=log,
        stderr=log,
    )
    if not wait_port(port, up=True, timeout_s=20):
        proc.kill()
        raise RuntimeError("sim cloud did not start")
    return proc, f"http://127.0.0.1:{port}"


def start_fleet(
    fleet: list[RuntimeProcess], work: Path, robots: int, broker: int, cloud: str, wave: int
) -> None:
    """Start the runtimes `wave` at a time, each wave READY before the next starts: 100 Python
    processes importing at once on 2 cores take minutes and time each other out. Each goes
    into `fleet` as it starts, so the caller closes every one even when a later one fails."""
    for n in range(robots):
        home = work / f"robot-{n:02d}"
        home.mkdir()
        config = write_config(
            home / "config.toml",
            {
                "device_id": f"robot-{n:02d}",
                "state_dir": str(home / "state"),
                "mqtt": {"port": broker},
                "cloud": {"base_url": cloud},
                "log": {"level": "WARNING"},
            },
        )
        fleet.append(RuntimeProcess(config, home).start(wait_ready=False))
        if len(fleet) % wave == 0 or len(fleet) == robots:
            for runtime in fleet[-wave:]:
                if not runtime.wait_line("READY=1", READY_S):
                    raise RuntimeError(f"{runtime.workdir.name} not READY:\n{runtime.log()}")


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (inherited by Mosquitto): every runtime, agent
    and notify socket is a descriptor here or there, a few hundred at 100 robots."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def drive(
    client: paho.Client,
    observed: Observed,
    robots: int,
    seconds: float,
    cloud: str,
    rng: random.Random,
) -> int:
    """Turns at a steady fleet-wide rate (each robot about every 6 s), PUI cancels now and then,
    and the cloud down for the middle sixth of the run. Returns how many turns were sent."""
    texts = [t for t, w in UTTERANCES for _ in range(w)]
    gap = 6.0 / robots
    start = time.monotonic()
    outage = (start + seconds * 5 / 12, start + seconds * 7 / 12)
    down = False
    turns = 0
    while (now := time.monotonic()) < start + seconds:
        if not down and outage[0] <= now < outage[1]:
            httpx.post(f"{cloud}/_sim/faults", json={"drop": True})
            down = True
        elif down and now >= outage[1]:
            httpx.post(f"{cloud}/_sim/reset")
            down = False
        robot = f"a2a/robot-{rng.randrange(robots):02d}"
        if rng.random() < 0.05:
            event = {"event_id": f"pui-{turns}", "kind": "cancel"}
            client.publish(f"{robot}/pui/event", json.dumps(event), qos=1)
        turn_id = f"f-{turns:06d}"
        with observed.lock:
            observed.sent[turn_id] = time.monotonic()
        body = {"turn_id": turn_id, "recognized_text": rng.choice(texts)}
        client.publish(f"{robot}/turn/request", json.dumps(body, ensure_ascii=False), qos=1)
        turns += 1
        time.sleep(max(0.0, start + turns * gap - time.monotonic()))
    if down:
        httpx.post(f"{cloud}/_sim/reset")
    return turns


def settle(fleet: list[RuntimeProcess], observed: Observed, timeout_s: float) -> int:
    """Wait for every turn's answer and every sync outbox to drain; returns writes still owed."""
    deadline = time.monotonic() + timeout_s
    owed = -1
    while time.monotonic() < deadline:
        with observed.lock:
            unanswered = len(observed.sent)
        owed = sum(_sync_pending(r) for r in fleet)
        if unanswered == 0 and owed == 0:
            return 0
        time.sleep(0.5)
    return owed


def _sync_pending(runtime: RuntimeProcess) -> int:
    db = sqlite3.connect(f"file:{runtime.workdir / 'state' / 'state.db'}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT count(*) FROM sync_outbox").fetchone()
        return int(row[0])
    finally:
        db.close()


@dataclass
class Run:
    """What one fleet run measured, for `report`."""

    robots: int
    seconds: float
    started_s: float = 0.0
    turns: int = 0
    cpu_s: dict[str, float] = field(default_factory=dict)  # runtime -> CPU s during the load
    rss_mb: list[float] = field(default_factory=list)
    counted: tuple[tuple[float, dict[str, int]], ...] = ()  # broker counters, from and to
    sync: dict[str, Any] = field(default_factory=dict)
    owed: int = 0
    alive: int = 0
    logged_errors: list[str] = field(default_factory=list)
    wave: int = 10


def measure(
    run: Run, work: Path, broker: Mosquitto, cloud: str, observed: Observed, rng: random.Random
) -> None:
    """Start the fleet, drive it, settle, close it; fills `run`."""
    client = start_client("127.0.0.1", broker.port, "fleet-driver", _subscribe, observed.on_message)
    fleet: list[RuntimeProcess] = []
    agents: AgentHosts | None = None
    try:
        t0 = time.monotonic()
        start_fleet(fleet, work, run.robots, broker.port, cloud, run.wave)
        run.started_s = time.monotonic() - t0
        agents = AgentHosts(broker.port, run.robots, work)  # not here: see bench.fleet_agents
        agents.wait_ready()
        cpu0 = {r.workdir.name: proc_stat(_pid(r))[1] for r in fleet}
        counted_from = observed.broker_snapshot()
        run.turns = drive(client, observed, run.robots, run.seconds, cloud, rng)
        run.counted = (counted_from, observed.broker_snapshot())
        run.cpu_s = {r.workdir.name: proc_stat(_pid(r))[1] - cpu0[r.workdir.name] for r in fleet}
        run.owed = settle(fleet, observed, 180)
        run.rss_mb = [proc_stat(_pid(r))[0] / 1024 for r in fleet]
        run.sync = httpx.get(f"{cloud}/_sim/sync").json()
        run.alive = sum(1 for r in fleet if r.proc is not None and r.proc.poll() is None)
        run.logged_errors = [
            f"{r.workdir.name}: {line}"
            for r in fleet
            for line in r.log().splitlines()
            if any(mark in line for mark in ('"level": "ERROR"', " ERROR ", "Traceback"))
        ]
    finally:
        if agents is not None:
            agents.close()
        for runtime in fleet:
            runtime.close()
        client.disconnect()
        client.loop_stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--robots", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--wave", type=int, default=10, help="runtimes started at once")
    args = parser.parse_args()
    raise_fd_limit()
    run = Run(args.robots, args.seconds, wave=args.wave)
    observed = Observed()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        broker = Mosquitto(work / "broker", extra_conf=f"sys_interval {SYS_INTERVAL_S}\n")
        broker.start()
        cloud_proc, cloud = start_cloud(work)
        try:
            measure(run, work, broker, cloud, observed, random.Random(args.seed))
        finally:
            cloud_proc.terminate()
            cloud_proc.wait(10)
            broker.stop()
    report(run, observed)


def report(run: Run, observed: Observed) -> None:
    rss = run.rss_mb
    cpu = [c / run.seconds * 100 for c in run.cpu_s.values()]
    print(
        f"fleet: {run.robots} runtimes, one Mosquitto, one sim cloud, {run.seconds:.0f} s of "
        f"mixed load (cloud down for the middle sixth)"
    )
    print(f"  all READY after                 {run.started_s:8.1f} s  ({run.wave} at a time)")
    answered = sum(len(v) for v in observed.took_ms.values())
    print(f"  turns sent / answered           {run.turns:8d} / {answered}")
    for status, took in sorted(observed.took_ms.items()):
        print(
            f"  turn round trip, {status:<8} (ms)  p50 {pct(took, 0.5):6.1f}  "
            f"p99 {pct(took, 0.99):6.1f}  ({len(took)} answers)"
        )
    print(f"  workflow events                 {dict(sorted(observed.workflow_events.items()))}")
    print(
        f"  RSS per runtime (MB)            min {min(rss):.1f}  p50 {pct(rss, 0.5):.1f}  "
        f"max {max(rss):.1f}  total {sum(rss):.0f}"
    )
    print(
        f"  CPU per runtime (% of a core)   p50 {pct(cpu, 0.5):.2f}  max {max(cpu):.2f}  "
        f"fleet {sum(cpu):.0f}  (during the load)"
    )
    (t_from, c_from), (t_to, c_to) = run.counted

    def rate(counter: str) -> float:
        return (c_to.get(counter, 0) - c_from.get(counter, 0)) / (t_to - t_from)

    print(
        f"  broker PUBLISH/s during load    in {rate('publish/messages/received'):.1f}  "
        f"out {rate('publish/messages/sent'):.1f}  (MQTT packets in, all kinds: "
        f"{rate('messages/received'):.1f})"
    )
    print(
        f"  sync writes applied by cloud    {run.sync['applied']} (duplicates acked, not "
        f"applied: {run.sync['duplicates']}); still owed {run.owed}"
    )
    errors = len(observed.runtime_errors) + len(run.logged_errors)
    unanswered = run.turns - answered
    print(f"  runtimes alive at the end       {run.alive} / {run.robots}")
    print(f"  refusals on runtime/error       {len(observed.runtime_errors)}")
    print(f"  ERROR lines in runtime logs     {len(run.logged_errors)}")
    for line in (observed.runtime_errors + run.logged_errors)[:10]:
        print(f"    {line[:160]}")
    figures: dict[str, float | int] = {
        "robots": run.robots,
        "seconds": run.seconds,
        "ready_s": round(run.started_s, 1),
        "rss_mb_p50": round(pct(rss, 0.5), 1),
        "cpu_pct_p50": round(pct(cpu, 0.5), 2),
        "broker_publish_in_s": round(rate("publish/messages/received"), 1),
        "broker_publish_out_s": round(rate("publish/messages/sent"), 1),
        "errors": errors + unanswered + run.owed + (run.robots - run.alive),
    }
    for key, value in figures.items():
        record("fleet", key, value)


def _subscribe(client: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
    if reason.is_failure:
        return
    for topic in ("turn/response", "runtime/error", "workflow/event"):
        client.subscribe(f"a2a/+/{topic}", qos=1)
    for counter in ("publish/messages/received", "publish/messages/sent", "messages/received"):
        client.subscribe(f"$SYS/broker/{counter}", qos=0)


def _pid(runtime: RuntimeProcess) -> int:
    assert runtime.proc is not None
    return runtime.proc.pid


if __name__ == "__main__":
    main()
