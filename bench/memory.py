"""Memory under a burst of maximum-size turns (issue 30, item 14): `--turns` turns of just
under `mqtt.max_payload_bytes` (a 4,000-character Korean text and a `device_context` padded to
fill the rest), published back to back, the sim cloud answering at once. Prints the runtime's
RSS (`/proc/PID/status` VmRSS) before, at its peak, and once every turn is answered, and what
one turn forwarded to the cloud in `device_context`. Asserts nothing.

    .venv/bin/python -m bench.memory [--turns 1500] [--pad-keys 1]

Against another tree (e.g. main before the fix, in a worktree):
`cd /tmp/base && PYTHONPATH=/tmp/base /work/main/.venv/bin/python -m bench.memory`
(the script itself must be there: copy it).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.benchlib import proc_stat, record, runtime_stack, stop_all
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"
MAX_PAYLOAD = 65536
WORDS = "안방으로 가서 청정해줘 "


def max_turn(turn_id: str, pad_keys: int = 1, size: int = MAX_PAYLOAD - 16) -> bytes:
    """A turn request of exactly `size` bytes: 4,000 characters of Korean text and a
    `device_context` (room, battery) padded with `pad_keys` filler keys to fill the rest."""
    text = (WORDS * (4000 // len(WORDS) + 1))[:4000]
    context: dict[str, Any] = {"current_room": "거실", "battery": 82}
    body = {"turn_id": turn_id, "recognized_text": text, "device_context": context}
    base = len(json.dumps(body, ensure_ascii=False).encode())
    keys = [f"pad{k:04d}" for k in range(pad_keys)]
    # each filler key costs `, "padNNNN": ""`: the rest is its string
    room = size - base - sum(len(k) + 8 for k in keys)
    for n, key in enumerate(keys):
        context[key] = "x" * (room // pad_keys + (1 if n < room % pad_keys else 0))
    data = json.dumps(body, ensure_ascii=False).encode()
    assert len(data) == size, (len(data), size)
    return data


class Watch:
    """VmRSS of a process every 0.1 s, in a thread: its peak and its last value (kB)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.last = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.last = proc_stat(self.pid)[0]
            except OSError:
                return
            self.peak = max(self.peak, self.last)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def answered(probe: MqttProbe) -> dict[str, int]:
    counts: dict[str, int] = {}
    for body in probe.messages(f"{ROOT}/turn/response"):
        counts[body["status"]] = counts.get(body["status"], 0) + 1
    return counts


def burst(turns: int, pad_keys: int, timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        broker, cloud, runtime = runtime_stack(work)
        probe = MqttProbe(broker.port, [f"{ROOT}/turn/response"], root=ROOT)
        try:
            runtime.start()
            assert runtime.proc is not None
            probe.turn("warm-up", "안녕")
            time.sleep(1.0)
            before = proc_stat(runtime.proc.pid)[0]
            watch = Watch(runtime.proc.pid)
            started = time.monotonic()
            for n in range(turns):
                probe.publish(f"{ROOT}/turn/request", max_turn(f"m{n:05d}", pad_keys))
            sent_s = time.monotonic() - started
            deadline = time.monotonic() + timeout_s
            while sum(answered(probe).values()) < turns + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            done_s = time.monotonic() - started
            time.sleep(3.0)  # settled: what stays
            watch.stop()
            after = proc_stat(runtime.proc.pid)[0]
            asked = [r for r in cloud.requests("/v1/a2a/turn") if r.get("body")]
            forwarded = max(
                len(json.dumps(r["body"].get("device_context"), ensure_ascii=False).encode())
                for r in asked[1:] or asked
            )
        finally:
            stop_all(probe, runtime, cloud, broker)
    return {
        "turns": turns,
        "before_mb": before / 1024,
        "peak_mb": watch.peak / 1024,
        "after_mb": after / 1024,
        "sent_s": sent_s,
        "done_s": done_s,
        "statuses": answered(probe),
        "asked": len(asked) - 1,
        "forwarded_context_bytes": forwarded,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1500)
    parser.add_argument("--pad-keys", type=int, default=1, help="filler keys in device_context")
    parser.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args()
    got = burst(args.turns, args.pad_keys, args.timeout_s)
    print(f"{got['turns']} turns of {MAX_PAYLOAD - 16} bytes back to back ({got['sent_s']:.1f} s)")
    print(f"  RSS before      {got['before_mb']:7.1f} MB")
    print(f"  RSS peak        {got['peak_mb']:7.1f} MB")
    print(f"  RSS after       {got['after_mb']:7.1f} MB  (every turn answered, 3 s later)")
    print(f"  answered        {got['statuses']} in {got['done_s']:.1f} s")
    print(f"  asked the cloud {got['asked']} turns")
    print(f"  device_context  {got['forwarded_context_bytes']} bytes forwarded at most")
    record("memory", f"rss_peak_mb_{args.turns}", round(got["peak_mb"], 1))
    record("memory", f"rss_after_mb_{args.turns}", round(got["after_mb"], 1))


if __name__ == "__main__":
    main()
