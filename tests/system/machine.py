"""A Debian bookworm machine booted with systemd 252 as PID 1 under systemd-nspawn.

The root file system is debootstrap's, built once and kept in CACHE (outside the clone, so CI
and later runs reuse it) under a name keyed by what it holds: the suite, the mirror, the
packages and this file's BUILD_STEPS. Each boot runs on an overlay of it (writes go to a
temporary upper dir), so the cached tree is never changed and a boot takes ~1 s.

Commands run inside with nsenter into the container's namespaces (the host has no machined:
`--register=no`), as `Machine.run([...])`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

CACHE = Path(os.environ.get("A2A_SYSTEM_CACHE", "/var/cache/a2a-edge-test"))
SUITE = "bookworm"
MIRROR = os.environ.get("A2A_SYSTEM_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("systemd", "systemd-sysv", "dbus", "python3", "python3-venv", "mosquitto")
# run in the fresh tree (chroot) before it is cached; part of the cache key
BUILD_STEPS = (
    # nothing reads the console: no getty on it (the boot would wait on a pipe)
    "systemctl mask console-getty.service getty@.service",
    # units a container does not need, off the boot's critical path
    "systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer",
    "apt-get clean",
)
BOOT_TIMEOUT_S = 60.0
INNER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class MachineError(RuntimeError):
    pass


def cache_key() -> str:
    text = "\n".join([SUITE, MIRROR, ",".join(PACKAGES), *BUILD_STEPS])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rootfs(log: Path) -> Path:
    """The cached tree, built now when missing (≈ 1 minute; one builder at a time)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    done = CACHE / f"rootfs-{cache_key()}"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (done / ".complete").exists():
            return done
        partial = CACHE / f".building-{cache_key()}"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(done, ignore_errors=True)
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(partial),
            MIRROR,
        ]
        with log.open("w") as out:
            built = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=600)
            if built.returncode != 0:
                raise MachineError(f"debootstrap failed ({built.returncode}): see {log}")
            for step in BUILD_STEPS:
                subprocess.run(["chroot", str(partial), "sh", "-c", step], stdout=out, check=True)
        (partial / ".complete").write_text(cache_key())
        partial.rename(done)
        return done


class Machine:
    """One boot of the cached tree on an overlay in `work`."""

    def __init__(self, lower: Path, work: Path, binds: Sequence[tuple[Path, str]] = ()) -> None:
        self.work = work
        self.root = work / "merged"
        for name in ("upper", "ovl", "merged"):
            (work / name).mkdir(parents=True, exist_ok=True)
        options = f"lowerdir={lower},upperdir={work / 'upper'},workdir={work / 'ovl'}"
        subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", options, str(self.root)], check=True
        )
        self._binds = list(binds)
        self._proc: subprocess.Popen[bytes] | None = None
        self.leader = 0
        self.console = work / "console.log"

    def boot(self) -> None:
        command = [
            "systemd-nspawn",
            "--register=no",
            "--keep-unit",
            "--quiet",
            "--console=pipe",
            "--link-journal=no",
            "--resolv-conf=off",
            "--timezone=off",
            f"--machine=a2a-test-{os.getpid()}",
            "-D",
            str(self.root),
            *[f"--bind-ro={host}:{inside}" for host, inside in self._binds],
            "--boot",
        ]
        with self.console.open("wb") as out:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        self.leader = self._find_leader()
        state = self.run(["systemctl", "is-system-running", "--wait"], timeout=BOOT_TIMEOUT_S)
        if state.stdout.strip() not in ("running", "degraded"):
            raise MachineError(f"the container did not boot: {state.stdout}{self.tail()}")

    def _find_leader(self) -> int:
        assert self._proc is not None
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise MachineError(f"systemd-nspawn exited {self._proc.returncode}{self.tail()}")
            for child in Path(f"/proc/{self._proc.pid}/task").glob("*/children"):
                for pid in child.read_text().split():
                    if Path(f"/proc/{pid}/root/run/systemd/private").exists():
                        return int(pid)
            time.sleep(0.05)
        raise MachineError(f"no systemd in the container within {BOOT_TIMEOUT_S}s{self.tail()}")

    def tail(self) -> str:
        text = self.console.read_text(errors="replace") if self.console.exists() else ""
        return "\n--- console:\n" + text[-3000:] if text else ""

    def run(
        self, args: Sequence[str], *, timeout: float = 60.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`args` inside the container, as root, with a clean environment."""
        command = [
            "nsenter",
            f"--target={self.leader}",
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--cgroup",
            "--",
            "env",
            "-i",
            f"PATH={INNER_PATH}",
            "LANG=C.UTF-8",
            "SYSTEMD_PAGER=",
            "SYSTEMD_COLORS=0",
            *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, input=input)

    def ok(self, args: Sequence[str], *, timeout: float = 60.0) -> str:
        """`run`, which must exit 0; its stdout."""
        done = self.run(args, timeout=timeout)
        if done.returncode != 0:
            raise MachineError(f"{' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout

    def shutdown(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.kill(self.leader, signal.SIGRTMIN + 4)  # systemd: poweroff
                self._proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait(timeout=10)
        subprocess.run(["umount", str(self.root)], check=False)
        shutil.rmtree(self.work, ignore_errors=True)
