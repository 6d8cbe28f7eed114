"""The footprint floor (issue 36): the design card's import floor (bench/import_floor.py) run
by the same interpreter as the runtime, on a copy of the runtime's DB and the same broker, its
start to READY=1 timed the way bench.runtime times ours (process start included, READY=1
taken from a fake `$NOTIFY_SOCKET`), its RSS read beside ours. Used by bench.runtime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.benchlib import proc_stat
from sim.processes import NotifyListener

SCRIPT = Path(__file__).with_name("import_floor.py")


def copy_db(source: Path, target: Path) -> Path:
    """A copy of a closed SQLite DB (with its -wal, if one is left), for the floor to open."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        src = Path(f"{source}{suffix}")
        if src.exists():
            shutil.copyfile(src, f"{target}{suffix}")
    return target


class ImportFloor:
    """bench/import_floor.py as a process: started, READY awaited, its RSS read, stopped."""

    def __init__(self, db: Path, port: int, cloud: str, python: str | None = None) -> None:
        # an absolute path that is still the venv's own (resolving the link would leave it)
        self.python = os.path.abspath(python) if python else sys.executable
        self.args = ["--db", str(db), "--port", str(port), "--cloud", cloud]
        self.proc: subprocess.Popen[bytes] | None = None
        self._notify: NotifyListener | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="a2a-flr-"))  # a short unix socket path

    def start(self, timeout_s: float = 60) -> float:
        """Start it; ms to READY=1, the process start included."""
        self.stop()
        self._notify = NotifyListener(self._dir / "notify.sock")
        env = {k: v for k, v in os.environ.items() if k != "WATCHDOG_USEC"}
        env["NOTIFY_SOCKET"] = str(self._notify.path)
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [self.python, "-P", str(SCRIPT), *self.args], env=env, cwd=self._dir
        )
        if not self._notify.wait_for("READY=1", timeout_s):
            self.stop()
            raise RuntimeError(f"the import floor was not READY within {timeout_s} s")
        return (time.monotonic() - t0) * 1000

    def rss_kb(self) -> int:
        assert self.proc is not None
        return proc_stat(self.proc.pid)[0]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._notify is not None:
            self._notify.close()
            self._notify = None
            (self._dir / "notify.sock").unlink(missing_ok=True)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
