"""The fleet's device agents, a batch of robots per process (bench.fleet starts these).

Why not all in the fleet driver: paho's network loop waits in `select.select()`, which takes
no descriptor at or above FD_SETSIZE (1024) — paho catches the ValueError, calls it a lost
connection and retries for ever, so the agent never connects ("device agents could not
connect"), whatever RLIMIT_NOFILE says. One robot's `DeviceAgents` holds about 21
descriptors (its session client and, since SPEC 4.8's presence, one client per simulated
capability with a will of its own: 7 clients, each a socket and paho's wake-up socket pair),
so one process fits 48 robots; the driver, which also keeps a notify socket per runtime, got
robots 0-43 of 100 connected. `PER_PROCESS` robots per host keeps every socket well under
1024 (and spreads the agents' ten or so threads per robot over more than one GIL).

    python -m bench.fleet_agents --port P --first 0 --count 25

Prints `READY <count>` once every agent is connected and subscribed, then serves until its
stdin closes (the driver closes it, or dies), and closes the agents.
"""

from __future__ import annotations

import argparse
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

from sim.devices import DeviceAgents

PER_PROCESS = 25  # x ~21 descriptors = ~525, half of select()'s 1024
READY_S = 120.0  # a host's agents, while the others start too


def root(n: int) -> str:
    return f"a2a/robot-{n:02d}"


class AgentHosts:
    """The child processes hosting the agents of robots 0..robots-1."""

    def __init__(self, port: int, robots: int, log_dir: Path) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        for first in range(0, robots, PER_PROCESS):
            count = min(PER_PROCESS, robots - first)
            log = log_dir / f"agents-{first:02d}.log"
            argv = ["--port", str(port), "--first", str(first), "--count", str(count)]
            self.logs.append(log)
            with log.open("ab") as err:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "bench.fleet_agents", *argv],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=err,
                        cwd=Path(__file__).resolve().parent.parent,
                    )
                )

    def wait_ready(self, timeout_s: float = READY_S) -> None:
        """Every host's READY line, or RuntimeError with the log of the first that failed."""
        deadline = time.monotonic() + timeout_s
        for proc, log in zip(self.procs, self.logs, strict=True):
            assert proc.stdout is not None
            line = b""
            with selectors.DefaultSelector() as pipe:  # epoll: no 1024 limit here either
                pipe.register(proc.stdout, selectors.EVENT_READ)
                while not line.endswith(b"\n") and time.monotonic() < deadline:
                    if pipe.select(0.5):
                        chunk = os.read(proc.stdout.fileno(), 256)
                        if not chunk:
                            break
                        line += chunk
            if not line.startswith(b"READY"):
                tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"device agents not ready ({log.name}):\n{tail}")

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()  # the host closes its agents and exits
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args()
    agents: list[DeviceAgents] = []
    try:
        for n in range(args.first, args.first + args.count):
            agents.append(DeviceAgents(args.port, root(n), time_scale=0.01))
        print(f"READY {len(agents)}", flush=True)
        sys.stdin.buffer.read()  # until the driver closes it
    finally:
        for agent in agents:
            agent.close()


if __name__ == "__main__":
    main()
