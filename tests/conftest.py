"""Fixtures every test module may use: a private broker, the sim cloud, the runtime as a real
process, an MQTT probe, read-only queries on the runtime's state DB. Nothing here talks to the
shared broker on 1883."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

from a2a_common.clock import iso
from edge.config.settings import Settings
from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess, write_config

FIXTURES = Path(__file__).parent / "fixtures"
DEVICE = "robot-test"
ROOT = f"a2a/{DEVICE}"


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    server = Mosquitto(tmp_path / "broker")
    server.start()
    yield server
    server.kill()


@pytest.fixture
def cloud() -> Iterator[SimCloud]:
    server = SimCloud().start()
    yield server
    server.stop()


def state_dir(tmp_path: Path) -> Path:
    """Where the runtime a test starts keeps its state."""
    return tmp_path / "state"


def runtime_config(
    tmp_path: Path, broker: Mosquitto, cloud_url: str, **sections: dict[str, Any]
) -> Path:
    values: dict[str, Any] = {
        "device_id": DEVICE,
        "state_dir": str(state_dir(tmp_path)),
        "mqtt": {"port": broker.port, "reconnect_min_s": 0.5, "reconnect_max_s": 1},
        "cloud": {"base_url": cloud_url, "turn_deadline_s": 2.0},
        "log": {"level": "DEBUG"},
    }
    for name, table in sections.items():
        values[name] = {**values.get(name, {}), **table}
    return write_config(tmp_path / "config.toml", values)


RuntimeFactory = Callable[..., RuntimeProcess]


def wait_online(port: int, since: str, timeout_s: float = 15.0) -> None:
    """Until the runtime started after `since` says `online` (it has subscribed by then)."""
    watcher = MqttProbe(port, [f"{ROOT}/runtime/status"])
    try:
        watcher.wait_for(
            f"{ROOT}/runtime/status",
            lambda b: b.get("state") == "online" and b.get("started_at", "") >= since,
            timeout_s=timeout_s,
        )
    finally:
        watcher.close()


@pytest.fixture
def runtime_factory(tmp_path: Path, broker: Mosquitto, cloud: SimCloud) -> Iterator[RuntimeFactory]:
    """Start `a2a-edge run` against this test's broker and cloud; sections override config,
    `env` adds environment variables (e.g. A2A_DEBUG_HOOKS=1)."""
    started: list[RuntimeProcess] = []

    def start(
        *,
        cloud_url: str | None = None,
        wait_ready: bool = True,
        env: dict[str, str] | None = None,
        **sections: dict[str, Any],
    ) -> RuntimeProcess:
        config = runtime_config(tmp_path, broker, cloud_url or cloud.url, **sections)
        proc = RuntimeProcess(config, tmp_path, env=env)
        started.append(proc)
        since = iso(datetime.now(UTC) - timedelta(seconds=1))
        proc.start(wait_ready=wait_ready)
        if wait_ready:
            wait_online(broker.port, since)
        return proc

    yield start
    for proc in started:
        proc.close()


@pytest.fixture
def probe(broker: Mosquitto) -> Iterator[MqttProbe]:
    client = MqttProbe(broker.port, [f"{ROOT}/#"], root=ROOT)
    yield client
    client.close()


Row = tuple[Any, ...]


def read_rows(db: Path, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """The rows `sql` returns from the SQLite file `db`, opened read-only (the runtime may be
    writing it: WAL lets both proceed)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute(sql, params).fetchall()


class StateRows(Protocol):
    def __call__(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...


@pytest.fixture
def state_rows(tmp_path: Path) -> StateRows:
    """`state_rows(sql, params=())`: the rows of a read-only query on this test's state DB."""
    db = Settings(state_dir=str(state_dir(tmp_path))).state_db_path

    def rows(sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return read_rows(db, sql, params)

    return rows


@pytest.fixture
def devices(broker: Mosquitto) -> Iterator[DeviceAgents]:
    agents = DeviceAgents(broker.port, ROOT)
    yield agents
    agents.close()


def eventually(condition: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Wait until `condition()` is truthy (polling with a deadline); returns its value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(0.02)


def refusal(probe: MqttProbe, error: str, **ref: Any) -> Any:
    """The first `P/runtime/error` with this word whose `ref` holds these ids."""

    def match(body: Any) -> bool:
        held = body.get("ref", {})
        return bool(body.get("error") == error and all(held.get(k) == v for k, v in ref.items()))

    return probe.wait_for(f"{ROOT}/runtime/error", match)


def workflow_event(probe: MqttProbe, workflow_id: str, status: str, timeout_s: float = 10) -> Any:
    """The first `P/workflow/event` of this workflow with this status."""
    return probe.wait_for(
        f"{ROOT}/workflow/event",
        lambda b: b["workflow_id"] == workflow_id and b["status"] == status,
        timeout_s,
    )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """The state dir on an 8 MiB tmpfs (a real full filesystem); skipped where we cannot mount.
    A module using it mounts on the host: mark it `pytest.mark.xdist_group("system")`."""
    state = state_dir(tmp_path)
    state.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(state)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield state
    subprocess.run(["umount", "-l", str(state)], check=False)


def fill(directory: Path) -> Path:
    """Take every free byte of the filesystem; returns the filler to delete."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (65536, 4096, 512, 1):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError:
                pass
    return filler
