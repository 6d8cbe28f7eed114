"""A command run in the background while a test does other things (the demo, ~22 s of mostly
waiting): output to files, not pipes (nothing has to read while it runs); killed if still
running when the block ends."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


class Background:
    def __init__(self, args: list[str | Path], work: Path, cwd: Path | None = None) -> None:
        self.args, self._cwd = [str(a) for a in args], cwd
        self._out, self._err = work / "background.out", work / "background.err"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Background:
        with self._out.open("wb") as out, self._err.open("wb") as err:
            self._proc = subprocess.Popen(self.args, cwd=self._cwd, stdout=out, stderr=err)
        return self

    def wait_output(self, text: str, timeout_s: float) -> bool:
        """Until `text` is in its stdout (False: it ended, or not within `timeout_s`)."""
        assert self._proc is not None, "not started"
        deadline = time.monotonic() + timeout_s
        while text not in self._out.read_text(encoding="utf-8", errors="replace"):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def done(self, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """Waits for the end; its exit code and output as `subprocess.run` gives them."""
        assert self._proc is not None, "not started"
        code = self._proc.wait(timeout=timeout_s)
        out, err = (p.read_text(encoding="utf-8") for p in (self._out, self._err))
        return subprocess.CompletedProcess(self.args, code, out, err)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def __enter__(self) -> Background:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
