"""`a2a-edge console` as a real process for the tests: started with `--port 0`, its address and
token read from the one line it prints; stopped with SIGTERM."""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

LINE = re.compile(r"a2a-edge console: (http://127\.0\.0\.1:(\d+)/\?token=(\S+))")


@dataclass
class Console:
    url: str  # with the token
    port: int
    token: str
    proc: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            res = conn.getresponse()
            return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
        finally:
            conn.close()


@contextmanager
def running_console(config: Path) -> Iterator[Console]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge", "console", "--config", str(config), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the process prints it once it listens
        found = LINE.search(line)
        if found is None:
            proc.kill()
            _, err = proc.communicate(timeout=5)
            pytest.fail(f"console did not start: {line!r} {err}")
        assert urlsplit(found.group(1)).hostname == "127.0.0.1"
        yield Console(found.group(1), int(found.group(2)), found.group(3), proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
