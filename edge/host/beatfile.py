"""The heartbeat's second home, `<state_dir>/heartbeat`: a file of fixed size, made at the first
beat and then overwritten in place. An overwrite takes no new block, so the beat is still
written when the disk is full and the state DB cannot take it (issue 30: `a2a-edge status`
said `unknown` after 15 s of a full disk instead of `degraded` with the reason). The DB's
`runtime_heartbeat` row stays what other readers read; `status` takes the newer of the two.

The file is one JSON line padded with spaces to `SIZE` bytes (0600). A reader that meets a
half-written line (no lock is taken) gets None and reads the DB's beat instead."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from a2a_common import jsonx

log = logging.getLogger(__name__)

NAME = "heartbeat"
SIZE = 4096  # one page; a beat is ~1 KB (its problems list is cut to fit)


def _encoded(beat: dict[str, Any]) -> bytes:
    data = jsonx.dumps(beat).encode("utf-8")
    if len(data) < SIZE:
        return data
    problems = list(beat.get("problems") or [])
    while problems and len(data) >= SIZE:  # the first problems are kept, the rest counted
        problems.pop()
        cut = {**beat, "problems": [*problems, "(more problems: see the log)"]}
        data = jsonx.dumps(cut).encode("utf-8")
    if len(data) >= SIZE:
        keep = ("ts", "pid", "health", "broker", "cloud")
        data = jsonx.dumps({k: beat.get(k) for k in keep}).encode("utf-8")
    return data


class BeatFile:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / NAME
        self._fd: int | None = None
        self._failed = ""  # the last failure, logged once until a write succeeds

    def write(self, beat: dict[str, Any]) -> bool:
        """Overwrite the file with `beat`; False (logged once) when it cannot be written."""
        try:
            if self._fd is None:
                self._fd = self._open()
            line = _encoded(beat) + b"\n"
            written = os.pwrite(self._fd, line.ljust(SIZE, b" "), 0)
            if written != SIZE:
                raise OSError(f"short write ({written} of {SIZE} bytes)")
        except OSError as exc:
            if str(exc) != self._failed:
                log.warning("the heartbeat file %s could not be written: %s", self.path, exc)
            self._failed = str(exc)
            self.close()
            return False
        self._failed = ""
        return True

    def _open(self) -> int:
        """Open (made full size at once, while there is space: later writes take no block)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size != SIZE:
                os.pwrite(fd, b" " * SIZE, 0)
                os.ftruncate(fd, SIZE)
        except OSError:
            os.close(fd)
            raise
        return fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_beat(state_dir: Path) -> dict[str, Any] | None:
    """The beat in the file, or None (no file, a torn or foreign content)."""
    try:
        fd = os.open(state_dir / NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.pread(fd, SIZE, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    line, _, _ = data.partition(b"\n")
    try:
        beat = json.loads(line.decode("utf-8"))
    except ValueError:
        return None
    return beat if isinstance(beat, dict) and isinstance(beat.get("ts"), str) else None
