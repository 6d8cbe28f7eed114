"""Logging to stderr as text or JSON lines. User words and secrets are logged only at DEBUG.

Under journald (`JOURNAL_STREAM` names the device and inode stderr is) every line starts with
its syslog priority as sd-daemon(3) has it (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug)
and carries no timestamp of its own: the journal stamps each entry, and `journalctl -p warning`
filters on the prefix. A traceback is prefixed line by line (each line is its own entry).

The ids a line is about go in `extra=fields(turn_id=…, …)`: in the JSON format they are fields
of the object (`{"turn_id": "t-1", …}`), never a Python repr inside the message text.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

PRIORITY = {"DEBUG": 7, "INFO": 6, "WARNING": 4, "ERROR": 3, "CRITICAL": 2}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JOURNAL_FORMAT = "%(name)s: %(message)s"  # the journal has the time and the priority


def fields(**ids: Any) -> dict[str, Any]:
    """`extra=` for a log call: ids as structured fields (JSON values, lists included)."""
    return {"fields": ids}


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
