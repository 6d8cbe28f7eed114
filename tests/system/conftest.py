"""One booted container for the module: the project installed into it the README's way.

Needs root, systemd-nspawn, debootstrap and nsenter (`./bootstrap.sh test` installs the first
two with apt-get when it runs as root); otherwise every test here is skipped with one reason.
The wheel is built offline from the checkout (as tests/e2e/test_package.py does); its
dependencies are downloaded once by the host's pip into a wheelhouse in the cache, and
`systemd/install.sh --wheel` installs from there (`PIP_ARGS=--no-index --find-links`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.broker import free_port
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import write_config
from tests.system.machine import CACHE, Machine, MachineError, rootfs

REPO = Path(__file__).parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
DEVICE = "robot-sys"
ROOT = f"a2a/{DEVICE}"
SRC = "/root/a2a-edge"
PIP_DOWNLOAD = [
    sys.executable,
    "-m",
    "pip",
    "download",
    "-q",
    "--only-binary=:all:",
]  # the checkout's systemd/ and README.md, and the wheels, read-only


def missing() -> str:
    if os.geteuid() != 0:
        return "not root"
    tools = ("systemd-nspawn", "debootstrap", "nsenter", "mount")
    absent = [t for t in tools if not shutil.which(t, path=os.environ["PATH"] + ":/usr/sbin")]
    return f"no {', '.join(absent)}" if absent else ""


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def wheelhouse(wheel: Path) -> Path:
    """The runtime dependencies as wheels, downloaded once (keyed by what pyproject asks)."""
    wanted = "\n".join(PYPROJECT["project"]["dependencies"]) + sys.version
    house = CACHE / f"wheels-{hashlib.sha256(wanted.encode()).hexdigest()[:16]}"
    if not (house / ".complete").exists():
        got = run([*PIP_DOWNLOAD, "-d", str(house), str(wheel)])
        if got.returncode != 0:
            pytest.skip(f"system tests: no runtime wheels here (pip download): {got.stderr[-300:]}")
        (house / wheel.name).unlink()  # the project's wheel is built fresh every run
        (house / ".complete").touch()
    return house


def build_wheel(dist: Path) -> Path:
    src = dist.parent / "wheel-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    # the top-level packages: a subpackage (edge.cli) is copied with its parent
    for package in sorted({p.split(".")[0] for p in PYPROJECT["tool"]["setuptools"]["packages"]}):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = run([*pip_wheel, "-w", str(dist), str(src)])
    assert built.returncode == 0, built.stderr[-800:]
    (found,) = dist.glob("a2a_edge-*.whl")
    return found


def stage_source(work: Path) -> Path:
    """What the operator has on the robot: the checkout's systemd/ and README, a wheel."""
    src = work / "src"
    shutil.copytree(REPO / "systemd", src / "systemd")
    shutil.copy(REPO / "README.md", src / "README.md")
    wheel = build_wheel(src / "dist")
    shutil.copytree(wheelhouse(wheel), src / "wheels")
    return src


class System:
    """The booted machine, the host's sim cloud and what the tests need to reach them."""

    def __init__(self, machine: Machine, cloud: SimCloud, mqtt_port: int, wheel: str) -> None:
        self.machine = machine
        self.wheel = wheel
        self.cloud = cloud
        self.mqtt_port = mqtt_port
        self.installed: subprocess.CompletedProcess[str] | None = None
        self.started: subprocess.CompletedProcess[str] | None = None

    def install_and_start(self) -> None:
        """The README's steps, once for the module (each test can then run alone)."""
        self.installed = self.install("--no-start")
        if self.installed.returncode == 0:
            self.config()  # the README's sudoedit, before the first start: no broker on 1883
            self.started = self.machine.run(["systemctl", "enable", "--now", "a2a-edge"])

    def install(self, *extra: str) -> subprocess.CompletedProcess[str]:
        env = ["env", f"PIP_ARGS=--no-index --find-links {SRC}/wheels"]
        wheel = f"{SRC}/dist/{self.wheel}"
        command = [*env, "sh", f"{SRC}/systemd/install.sh", "--wheel", wheel]
        return self.machine.run([*command, *extra], timeout=180)

    def config(self, **sections: dict[str, object]) -> None:
        """What the README's `sudoedit /etc/a2a-edge/config.toml` does, for this test bed."""
        values: dict[str, object] = {
            "device_id": DEVICE,
            "state_dir": "/var/lib/a2a-edge",
            "mqtt": {"port": self.mqtt_port, "reconnect_min_s": 0.5, "reconnect_max_s": 1},
            "cloud": {"base_url": self.cloud.url, "turn_deadline_s": 2.0},
            "log": {"level": "INFO"},
        }
        for name, table in sections.items():
            values[name] = {**values.get(name, {}), **table}  # type: ignore[dict-item]
        path = self.machine.root / "etc/a2a-edge/config.toml"
        write_config(path, values)  # its mode and owner stay install.sh's (0640 root:a2a-edge)

    def show(self, *props: str) -> dict[str, str]:
        out = self.machine.ok(
            ["systemctl", "show", "a2a-edge", *[f"--property={p}" for p in props]]
        )
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self, *args: str) -> str:
        return self.machine.ok(["journalctl", "--no-pager", "-o", "cat", "-u", "a2a-edge", *args])

    def probe(self) -> MqttProbe:
        topics = [f"{ROOT}/runtime/status", f"{ROOT}/turn/response", f"{ROOT}/runtime/error"]
        return MqttProbe(self.mqtt_port, topics, root=ROOT)


@pytest.fixture(scope="package")
def system() -> Iterator[System]:
    work = Path(tempfile.mkdtemp(prefix="a2a-system-"))
    try:
        lower = rootfs(work / "debootstrap.log")
    except (MachineError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(work, ignore_errors=True)
        pytest.skip(f"system tests: this machine cannot build the container's rootfs: {exc}")
    src = stage_source(work)
    try:
        machine = Machine(lower, work / "machine", binds=[(src, SRC)])
    except subprocess.CalledProcessError as exc:  # no overlayfs in this (container) host
        shutil.rmtree(work, ignore_errors=True)
        pytest.skip(f"system tests: this machine cannot mount the container's overlay: {exc}")
    port = free_port()
    conf = machine.root / "etc/mosquitto/conf.d/a2a-test.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    cloud = SimCloud().start()
    try:
        try:
            machine.boot()
        except MachineError as exc:  # the host cannot run a container (no privileges, no cgroup)
            pytest.skip(f"system tests: this machine cannot boot a container: {exc}"[:1500])
        system = System(machine, cloud, port, next((src / "dist").glob("*.whl")).name)
        system.install_and_start()
        yield system
    finally:
        machine.shutdown()  # first: the runtime's keep-alive connection would hold cloud.stop()
        cloud.stop()
        shutil.rmtree(work, ignore_errors=True)
