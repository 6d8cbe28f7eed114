"""Logging to stderr as text or JSON lines. User words and secrets are logged only at DEBUG.

Under journald (`JOURNAL_STREAM` names the device and inode stderr is) every line starts with
its syslog priority as sd-daemon(3) has it (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug)
and carries no timestamp of its own: the journal stamps each entry, and `journalctl -p warning`
filters on the prefix. A traceback is prefixed line by line (each line is its own entry).

The ids a line is about go in `extra=fields(turn_id=…, …)`: in the JSON format they are fields
of the object (`{"turn_id": "t-1", …}`), never a Python repr inside the message text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

PRIORITY = {"DEBUG": 7, "INFO": 6, "WARNING": 4, "ERROR": 3, "CRITICAL": 2}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JOURNAL_FORMAT = "%(name)s: %(message)s"  # the journal has the time and the priority


def fields(**ids: Any) -> dict[str, Any]:
    """`extra=` for a log call: ids as structured fields (JSON values, lists included)."""
    return {"fields": ids}


MAX_KINDS = 256  # kinds a RepeatLimiter tells apart in a window; more share one


class RepeatLimiter:
    """A flood must not become a flood of lines: at most `lines` lines of one kind (a refusal's
    topic and error, say) each `window_s`; the rest of the window is counted, not written, and
    its end brings one line with the count (WARNING). The window runs on `monotonic`, the
    injected clock's; the closing line is scheduled on the running asyncio loop, else written
    by the next `say` after the window's end (or `flush`)."""

    def __init__(
        self, logger: logging.Logger, lines: int, window_s: float, monotonic: Callable[[], float]
    ) -> None:
        self._log = logger
        self._lines = lines
        self._window_s = window_s
        self._monotonic = monotonic
        self._windows: dict[str, tuple[float, int, int]] = {}  # kind -> (start, said, held back)
        self._closing: asyncio.TimerHandle | None = None
        self.held_back = 0  # lines not written since the start, over every kind

    def say(self, kind: str, level: int, msg: str, *args: Any, **kwargs: Any) -> bool:
        """Log the line unless its kind had its `lines` in this window; True when written."""
        now = self._monotonic()
        self.flush(now)
        if kind not in self._windows and len(self._windows) >= MAX_KINDS:
            kind = "(other kinds)"  # kinds a sender can vary stay a bounded set
        start, said, held = self._windows.get(kind, (now, 0, 0))
        if said < self._lines:
            self._windows[kind] = (start, said + 1, held)
            self._log.log(level, msg, *args, **kwargs)
            return True
        self._windows[kind] = (start, said, held + 1)
        self.held_back += 1
        self._schedule(start + self._window_s - now)
        return False

    def flush(self, now: float | None = None) -> None:
        """Close the windows that have ended: one line for each that held lines back."""
        now = self._monotonic() if now is None else now
        for kind, (start, _said, held) in list(self._windows.items()):
            if now - start < self._window_s:
                continue
            del self._windows[kind]
            if held:
                self._log.warning(
                    "%d more lines like %s in %g s not written (limit %d a window)",
                    held,
                    kind,
                    self._window_s,
                    self._lines,
                    extra=fields(kind=kind, held_back=held),
                )

    def _schedule(self, delay: float) -> None:
        if self._closing is not None and not self._closing.cancelled():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next `say` closes the window
        self._closing = loop.call_later(max(0.0, delay) + 0.01, self._close)

    def _close(self) -> None:
        self._closing = None
        now = self._monotonic()
        self.flush(now)
        pending = [start for start, _said, held in self._windows.values() if held]
        if pending:
            self._schedule(min(pending) + self._window_s - now)


def under_journald(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """True when `stream` is the journal's stream socket that systemd gave us (systemd.exec(5):
    JOURNAL_STREAM is `device:inode` of it; a redirected stderr no longer matches)."""
    env = os.environ if environ is None else environ
    device, _, inode = env.get("JOURNAL_STREAM", "").partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(device), int(inode))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            entry.update({k: v for k, v in extra.items() if k not in entry})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class JournalPrefix(logging.Formatter):
    """Wraps a formatter: `<N>` before every line of what it formats."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{PRIORITY.get(record.levelname, 6)}>"
        text = self._inner.format(record)
        return "\n".join(prefix + line for line in text.split("\n"))


def formatter(fmt: str, journald: bool) -> logging.Formatter:
    if fmt == "json":
        inner: logging.Formatter = JsonFormatter()
    else:
        inner = logging.Formatter(JOURNAL_FORMAT if journald else TEXT_FORMAT)
    return JournalPrefix(inner) if journald else inner


def configure(level: str, fmt: str, environ: Mapping[str, str] | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt, under_journald(sys.stderr, environ)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
