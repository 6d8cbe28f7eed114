"""The runtime as a real subprocess, with a fake `NOTIFY_SOCKET` that records sd_notify lines."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


class NotifyListener:
    """A unix datagram socket standing in for systemd's notify socket."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(path))
        self._sock.settimeout(0.2)
        self._lines: list[str] = []
        self.timed: list[tuple[float, str]] = []  # (monotonic arrival, line)
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._closed:
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            lines = data.decode("utf-8", "replace").splitlines()
            with self._cond:
                self._lines.extend(lines)
                self.timed.extend((time.monotonic(), line) for line in lines)
                self._cond.notify_all()

    def wait_for(self, line: str, timeout_s: float = 15.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: line in self._lines, timeout_s)

    @property
    def lines(self) -> list[str]:
        with self._cond:
            return list(self._lines)

    def close(self) -> None:
        self._closed = True
        self._sock.close()


def write_config(path: Path, values: dict[str, Any]) -> Path:
    """A TOML file from a two-level dict (top-level keys, then sections)."""

    def fmt(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return repr(value)
        if isinstance(value, list):
            return "[" + ", ".join(fmt(v) for v in value) + "]"
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'

    top = [f"{k} = {fmt(v)}" for k, v in values.items() if not isinstance(v, dict)]
    sections = []
    for name, table in values.items():
        if isinstance(table, dict):
            sections.append(f"\n[{name}]")
            sections.extend(f"{k} = {fmt(v)}" for k, v in table.items())
    path.write_text("\n".join(top + sections) + "\n", encoding="utf-8")
    return path


class RuntimeProcess:
    """`python -m edge run --config …` with its log in a file and READY awaited."""

    def __init__(
        self,
        config: Path,
        workdir: Path,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        cwd: Path | None = None,
    ) -> None:
        self.config = config
        self.python = python  # another venv's interpreter: e.g. one with the runtime's deps only
        # `python -m` puts its working directory first on sys.path: from the project root the
        # runtime imports the source tree, elsewhere the package as that venv installed it
        self.cwd = cwd
        self.workdir = workdir
        self.log_path = workdir / "runtime.log"
        self.extra_env = env or {}
        self.notify: NotifyListener | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._starts = 0

    def start(self, *, wait_ready: bool = True, timeout_s: float = 20.0) -> RuntimeProcess:
        self._starts += 1
        if self.notify is not None:
            self.notify.close()
        # a short path of its own: unix socket paths are limited to 107 bytes
        short_dir = Path(tempfile.mkdtemp(prefix="a2a-ntf-"))
        self.notify = NotifyListener(short_dir / "notify.sock")
        env = {k: v for k, v in os.environ.items() if k != "WATCHDOG_USEC"}
        env.update(self.extra_env, NOTIFY_SOCKET=str(self.notify.path))
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.python, "-m", "edge", "run", "--config", str(self.config)],
                stdout=log,
                stderr=log,
                env=env,
                cwd=self.cwd,
            )
        if wait_ready and not self.wait_line("READY=1", timeout_s):
            self.kill()
            raise RuntimeError(f"runtime not READY within {timeout_s}s:\n{self.log()}")
        return self

    def wait_line(self, line: str, timeout_s: float = 15.0) -> bool:
        assert self.notify is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.notify.wait_for(line, 0.2):
                return True
            if self.proc is not None and self.proc.poll() is not None:
                return self.notify.wait_for(line, 0.2)
        return False

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def terminate(self, timeout_s: float = 10.0) -> int:
        return self._signal(signal.SIGTERM, timeout_s)

    def kill(self) -> int:
        return self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: signal.Signals, timeout_s: float) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        if self.notify is not None:
            self.notify.close()
