"""Crash torture: a mixed workload against the real runtime, SIGKILLed at random moments.

Used by tests/reliability/test_torture.py (a few kills in CI) and run_full.sh (hundreds)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess, write_config
from sim.world import World
from tests.conftest import read_rows

DEVICE = "robot-torture"
ROOT = f"a2a/{DEVICE}"
UTTERANCES = [
    "안방으로 가서 청정해줘",
    "거실 청정해줘",
    "안녕",
    "주방 좀 깨끗하게 해줘",
    "충전하러 가",
    "오늘 날씨 어때?",
    "작은방으로 이동해",
    "청정 멈춰",
]
TERMINAL = ("completed", "failed", "cancelled", "rejected")


@dataclass
class Figures:
    kills: int = 0
    restarts: int = 0
    turns: int = 0
    integrity_failures: int = 0
    turns_without_pair: int = 0
    duplicate_pairs: int = 0
    lost_writes: int = 0
    duplicate_applications: int = 0
    stuck_workflows: int = 0
    workflows: int = 0
    resent_commands: int = 0
    notes: list[str] = field(default_factory=list)


class Torture:
    def __init__(self, work: Path, seed: int = 7) -> None:
        self.work = work
        self.rng = random.Random(seed)
        self.figures = Figures()
        self.broker = Mosquitto(work / "broker")
        self.broker.start()
        self.cloud = SimCloud().start()
        self.config = write_config(
            work / "config.toml",
            {
                "device_id": DEVICE,
                "state_dir": str(work / "state"),
                "mqtt": {"port": self.broker.port, "reconnect_min_s": 0.5, "reconnect_max_s": 1},
                "cloud": {"base_url": self.cloud.url, "turn_deadline_s": 1.0},
                "sync": {"deadline_s": 1.0, "max_backoff_s": 0.3},
                "taskmanager": {"events_deadline_s": 0.5},
                "log": {"level": "INFO"},
            },
        )
        self.runtime = RuntimeProcess(self.config, work)
        self.devices = DeviceAgents(self.broker.port, ROOT, world=World(time_scale=0.01))
        self.probe = MqttProbe(
            self.broker.port, [f"{ROOT}/turn/response"], client_id="torture-voice"
        )
        self.db_path = work / "state" / "state.db"
        self.runtime.start()

    def close(self) -> None:
        self.probe.close()
        self.devices.close()
        self.runtime.close()
        self.cloud.stop()
        self.broker.kill()

    def step(self) -> None:
        """Some load, then a kill at a random moment, a check, a restart."""
        for _ in range(self.rng.randint(1, 4)):
            action = self.rng.random()
            if action < 0.7:
                self.figures.turns += 1
                text = self.rng.choice(UTTERANCES)
                self.probe.client.publish(
                    f"{ROOT}/turn/request",
                    _json({"turn_id": f"turn-{self.figures.turns:05d}", "recognized_text": text}),
                    qos=1,
                )
            elif action < 0.8:
                self.devices.press_pui()
            elif action < 0.9:
                self.cloud.set_faults(drop=True)
            else:
                self.cloud.set_faults()
            time.sleep(self.rng.uniform(0.0, 0.15))
        self.runtime.kill()
        self.figures.kills += 1
        self._integrity()
        if self.rng.random() < 0.3:
            self.cloud.set_faults()
        self.runtime.start()
        self.figures.restarts += 1

    def _one(self, sql: str) -> Any:
        """The first column of the first row `sql` gives on the state DB (read-only)."""
        return read_rows(self.db_path, sql)[0][0]

    def _integrity(self) -> None:
        if self._one("PRAGMA integrity_check") != "ok":
            self.figures.integrity_failures += 1

    def settle(self, timeout_s: float = 60.0) -> None:
        """Cloud up, no more kills: everything owed gets done."""
        self.cloud.set_faults()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            owed = self._one("SELECT count(*) FROM sync_outbox")
            open_wf = self._one(f"SELECT count(*) FROM workflows WHERE status NOT IN {TERMINAL}")
            pending = self._one("SELECT count(*) FROM pairs WHERE status = 'pending'")
            pairs = self._one("SELECT count(DISTINCT turn_id) FROM pairs")
            if owed == 0 and open_wf == 0 and pending == 0 and pairs >= self.figures.turns:
                return
            time.sleep(0.3)

    def check(self) -> Figures:
        f = self.figures
        turn_ids = {r[0] for r in read_rows(self.db_path, "SELECT turn_id FROM pairs")}
        f.turns_without_pair = sum(
            1 for n in range(1, f.turns + 1) if f"turn-{n:05d}" not in turn_ids
        )
        f.duplicate_pairs = self._one("SELECT count(*) - count(DISTINCT turn_id) FROM pairs")
        f.workflows = self._one("SELECT count(*) FROM workflows")
        f.stuck_workflows = self._one(
            f"SELECT count(*) FROM workflows WHERE status NOT IN {TERMINAL}"
        )
        local_pairs = {r[0] for r in read_rows(self.db_path, "SELECT pair_id FROM pairs")}
        synced = [w for w in self.cloud.synced() if w["kind"] == "short_term_pair"]
        cloud_pairs = [w["payload"].get("pair_id") for w in synced]
        f.lost_writes = len(local_pairs - set(cloud_pairs))
        f.duplicate_applications = len(cloud_pairs) - len(set(cloud_pairs))
        f.resent_commands = sum(1 for n in self.devices.deliveries().values() if n > 1)
        return f


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, ensure_ascii=False)
