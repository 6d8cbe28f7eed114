"""PUI press → every `task/cancel` on the wire with every core saturated by other processes
(issue 36): bench.cancel's press (three dispatched tasks of one workflow, agents that hold and
confirm) in three conditions, taken in turns (`--rounds`; drift on a shared machine falls on
all three):

- unloaded: the busy loops stopped (SIGSTOP);
- loaded: one busy-loop process per core at the default nice, the runtime at nice 0;
- loaded at the unit's settings: the same, the runtime at systemd/a2a-edge.service's `Nice=`
  (every thread of it, as systemd's Nice= sets the process before its threads exist).

The bench sets nice only. The unit has no `CPUWeight=` (the unit says why); one would need the
runtime in a cgroup of its own, which `systemd-run` gives only with systemd as PID 1: the
bench says whether it is usable here. Mosquitto and the measuring client run at the default
nice in every condition (the robot's broker is Debian's unit, not ours). Goal: loaded at the
unit's settings, p99 ≤ 3× unloaded p99.
Beside each, the press as the measuring client saw it come back from the broker to the last
cancel: the runtime's part and the cancels' hop from the broker, without the press's own trip
through the client and the broker. Prints figures; asserts nothing.

    .venv/bin/python -m bench.loaded [--presses 30] [--rounds 3] [--nice N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.benchlib import pct, record, runtime_stack, stop_all
from bench.cancel import OPS, ROOT, Closer, Wire, press
from sim.devices import Behavior, DeviceAgents

UNIT = Path(__file__).parents[1] / "systemd" / "a2a-edge.service"
CONDITIONS = ("unloaded", "loaded", "loaded_at_unit")


def unit_setting(name: str) -> str | None:
    """The value of `name=` in the unit's [Service], or None."""
    found = re.search(rf"^{name}=(\S+)", UNIT.read_text(), re.M)
    return found.group(1) if found else None


def systemd_run_usable() -> bool:
    """Can a transient unit be started here (systemd as PID 1, its bus reachable)?"""
    if shutil.which("systemd-run") is None or not Path("/run/systemd/system").is_dir():
        return False
    done = subprocess.run(
        ["systemd-run", "--quiet", "--wait", "--collect", "true"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


def set_nice(pid: int, nice: int) -> None:
    """Every thread of `pid` at `nice` (setpriority applies to one thread on Linux)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile


class BusyLoops:
    """One busy-loop process per core at the default nice, paused (SIGSTOP) until `load()`."""

    def __init__(self, count: int) -> None:
        self.procs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)
        ]
        self.pause()

    def _send(self, sig: signal.Signals) -> None:
        for proc in self.procs:
            proc.send_signal(sig)

    def load(self) -> None:
        self._send(signal.SIGCONT)

    def pause(self) -> None:
        self._send(signal.SIGSTOP)

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


Timings = dict[str, list[tuple[float, float]]]


def echo_of(event_id: str) -> Callable[[str, Any], bool]:
    return lambda topic, body: topic.endswith("/pui/event") and body.get("event_id") == event_id


def run(presses: int, rounds: int, nice: int, hogs: int, work: Path) -> Timings:
    """Per condition, ms from the press to the last cancel, and from the press's echo (its
    arrival back at the measuring client) to the last cancel."""
    sections = {"taskmanager": {"cancel_confirm_s": 0.5}}  # as bench.cancel
    broker, cloud, runtime = runtime_stack(work, sections=sections)
    runtime.start()
    assert runtime.proc is not None
    agents = DeviceAgents(broker.port, ROOT, behaviors={op: Behavior("hold") for op in OPS})
    wire = Wire(broker.port)
    loops = BusyLoops(hogs)
    took: Timings = {name: [] for name in CONDITIONS}
    try:
        press(wire, "wf-warm", "p-warm")  # the first workflow's imports and caches
        for r in range(rounds):
            for name in CONDITIONS:
                try:
                    set_nice(runtime.proc.pid, nice if name == "loaded_at_unit" else 0)
                except PermissionError as error:
                    raise SystemExit(f"nice {nice} needs root or CAP_SYS_NICE: {error}") from None
                if name != "unloaded":
                    loops.load()
                for n in range(presses):
                    event = f"p-{name}-{r}-{n}"
                    pressed, last = press(wire, f"wf-{name}-{r}-{n}", event)
                    echo = wire.wait(echo_of(event), 1)
                    took[name].append(((last - pressed) * 1000, (last - echo) * 1000))
                loops.pause()
    finally:
        loops.stop()
        stop_all(Closer(wire), agents, runtime, cloud, broker)
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--presses", type=int, default=30, help="presses per block")
    parser.add_argument("--rounds", type=int, default=3, help="blocks of each condition")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy loops")
    parser.add_argument(
        "--nice", type=int, default=None, help="the runtime's nice under load (default: the unit's)"
    )
    args = parser.parse_args()
    nice = args.nice if args.nice is not None else int(unit_setting("Nice") or 0)
    weight = unit_setting("CPUWeight")
    usable = systemd_run_usable()
    weight_note = (
        f"CPUWeight={weight or 'unset (100)'} in the unit, not applied: the bench sets nice"
        + ("" if usable else "; no systemd-run here (systemd is not PID 1) to apply one")
    )
    with tempfile.TemporaryDirectory() as work:
        took = run(args.presses, args.rounds, nice, args.hogs, Path(work))
    p99 = {name: pct([t for t, _ in values], 0.99) for name, values in took.items()}
    print(
        f"PUI press -> every task/cancel on the wire; {args.hogs} busy loops at nice 0 when"
        f" loaded; {args.rounds} rounds of {args.presses} presses per condition"
    )
    labels = {
        "unloaded": "unloaded",
        "loaded": "loaded, runtime at nice 0",
        "loaded_at_unit": f"loaded, runtime at the unit's Nice={nice}",
    }
    for name in CONDITIONS:
        total, since_echo = [t for t, _ in took[name]], [e for _, e in took[name]]
        print(
            f"  {labels[name]:<38} p50 {pct(total, 0.5):7.2f} ms  p99 {p99[name]:7.2f} ms"
            f"  ({p99[name] / p99['unloaded']:.2f}× unloaded p99; n={len(total)})"
        )
        print(
            f"    from the press's echo              p50 {pct(since_echo, 0.5):7.2f} ms"
            f"  p99 {pct(since_echo, 0.99):7.2f} ms"
        )
    print(f"  {weight_note}; goal: loaded at the unit's settings ≤ 3× unloaded p99")
    record("loaded", "unloaded_p99_ms", round(p99["unloaded"], 2))
    record("loaded", "loaded_p99_ms", round(p99["loaded"], 2))
    record("loaded", "loaded_at_unit_p99_ms", round(p99["loaded_at_unit"], 2))
    record("loaded", "loaded_over_unloaded", round(p99["loaded"] / p99["unloaded"], 2))
    record("loaded", "at_unit_over_unloaded", round(p99["loaded_at_unit"] / p99["unloaded"], 2))
    record("loaded", "nice", nice)
    record("loaded", "cpu_weight", weight or "none")


if __name__ == "__main__":
    main()
