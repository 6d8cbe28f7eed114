"""`systemctl reload` that returns only once the reload is applied (or refused).

The service, on SIGHUP: `RELOADING=1` + `MONOTONIC_USEC=` to systemd (sd_notify(3)), the config
read and applied, then `READY=1`, and a mark file `<state_dir>/reloaded` (its pid, when the
signal was handled, whether it applied and why not). With `Type=notify-reload` (systemd 253+)
the notify lines alone make systemd wait; Debian bookworm has systemd 252, so the unit's
`ExecReload=` runs `a2a-edge reload`, which sends SIGHUP itself (no /bin/kill: procps is not on
a minimal Debian) and waits for the mark of that signal. A refused config makes it exit 1 with
the reason, so `systemctl reload` fails and says why; the service keeps its running config.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from edge.host.statelock import LOCK_NAME

MARK_NAME = "reloaded"
WAIT_S = 30.0
POLL_S = 0.05
APPLIED = ("log.level", "experience.mode", "privacy.")  # what SIGHUP applies (a prefix: all)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flat(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def needs_restart(running: Any, fresh: Any) -> list[str]:
    """The dotted keys whose value in the file differs from the running settings and that a
    reload does not apply (they take effect at the next start): names only, never values."""
    old, new = _flat(running.model_dump()), _flat(fresh.model_dump())
    changed = {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}
    return sorted(key for key in changed if not any(key == a or key.startswith(a) for a in APPLIED))


def monotonic_usec() -> int:
    """CLOCK_MONOTONIC in µs: what systemd's MONOTONIC_USEC= is, and one clock for all
    processes of the machine (the command compares it with the service's mark)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def write_mark(state_dir: Path, handled_usec: int, error: str) -> None:
    """Atomically (a rename): the command never reads half a mark."""
    body: dict[str, Any] = {"pid": os.getpid(), "handled_usec": handled_usec, "applied": not error}
    if error:
        body["error"] = error
    tmp = state_dir / f".{MARK_NAME}.tmp"
    try:
        tmp.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
        tmp.chmod(0o600)  # as every file of the state dir
        tmp.replace(state_dir / MARK_NAME)
    except OSError:
        tmp.unlink(missing_ok=True)  # nothing half-written is left behind
        raise


def read_mark(state_dir: Path) -> dict[str, Any] | None:
    try:
        body = json.loads((state_dir / MARK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def service_pid(state_dir: Path) -> int | None:
    """The pid `a2a-edge run` wrote into its lock file."""
    try:
        text = (state_dir / LOCK_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    pid, _, role = text.strip().partition(" ")
    return int(pid) if pid.isdigit() and role == "run" else None


def signal_and_wait(state_dir: Path, pid: int, wait_s: float = WAIT_S) -> tuple[int, str]:
    """SIGHUP to `pid`, then the mark that answers it: (exit code, what to print)."""
    sent_usec = monotonic_usec()
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        return 1, f"no process {pid}: the service is not running"
    except PermissionError:
        return 1, f"not allowed to signal pid {pid}: run as the service's user or root"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        mark = read_mark(state_dir)
        if mark and mark.get("pid") == pid and int(mark.get("handled_usec", 0)) >= sent_usec:
            if mark.get("applied"):
                return 0, "reloaded"
            return 1, f"reload refused, the service keeps its running config: {mark.get('error')}"
        time.sleep(POLL_S)
    return 1, f"pid {pid} did not confirm the reload within {wait_s:g} s"
