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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge.host.statelock import LOCK_NAME

MARK_NAME = "reloaded"
WAIT_S = 30.0
POLL_S = 0.05
EXIT_RESTART = 4  # applied, but keys changed in the file wait for a restart (they are named)
APPLIED = ("log.level", "experience.mode", "privacy.")  # what SIGHUP applies (a prefix: all)
AT_START_ONLY = ("accept_new_device_id",)  # read once at start (`run --accept-new-device-id`)


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
    changed -= set(AT_START_ONLY)
    return sorted(key for key in changed if not any(key == a or key.startswith(a) for a in APPLIED))


def monotonic_usec() -> int:
    """CLOCK_MONOTONIC in µs: what systemd's MONOTONIC_USEC= is, and one clock for all
    processes of the machine (the command compares it with the service's mark)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def write_mark(state_dir: Path, handled_usec: int, error: str, restart: Sequence[str] = ()) -> None:
    """Atomically (a rename): the command never reads half a mark. `restart`: the keys changed
    in the file that wait for a restart (names, never values)."""
    body: dict[str, Any] = {"pid": os.getpid(), "handled_usec": handled_usec, "applied": not error}
    if error:
        body["error"] = error
    if restart:
        body["needs_restart"] = list(restart)
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
    code, answer = signal_and_answer(state_dir, pid, wait_s)
    return code, str(answer.get("error") or answer["result"])


def _answer(code: int, text: str, mark: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """`a2a-edge reload`'s answer, shaped as every state-changing command's (`ok` true only
    with exit 0): `result` says what the service did, `error` why the exit is not 0."""
    result: dict[str, Any] = {
        "applied": bool(mark and mark.get("applied")),
        "needs_restart": list((mark or {}).get("needs_restart", [])),
    }
    if code == 0:
        return code, {"ok": True, "result": {**result, "message": text}}
    return code, {"ok": False, "result": result, "error": text}


def signal_and_answer(
    state_dir: Path, pid: int, wait_s: float = WAIT_S
) -> tuple[int, dict[str, Any]]:
    """SIGHUP to `pid`, then the mark that answers it: 0 applied; 4 applied, but keys changed
    in the file wait for a restart (named); 1 refused, not confirmed, no such process."""
    sent_usec = monotonic_usec()
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        return _answer(1, f"no process {pid}: the service is not running")
    except PermissionError:
        return _answer(1, f"not allowed to signal pid {pid}: run as the service's user or root")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        mark = read_mark(state_dir)
        if mark and mark.get("pid") == pid and int(mark.get("handled_usec", 0)) >= sent_usec:
            if not mark.get("applied"):
                why = f"reload refused, the service keeps its running config: {mark.get('error')}"
                return _answer(1, why, mark)
            if mark.get("needs_restart"):
                keys = ", ".join(mark["needs_restart"])
                return _answer(
                    EXIT_RESTART,
                    f"reloaded, but keys changed in the file wait for a restart: {keys}"
                    " (systemctl restart a2a-edge); the service runs with the values it"
                    " started with",
                    mark,
                )
            return _answer(0, "reloaded", mark)
        time.sleep(POLL_S)
    return _answer(1, f"pid {pid} did not confirm the reload within {wait_s:g} s")
