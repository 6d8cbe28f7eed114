"""Where the runtime's CPU goes: py-spy samples the runtime process while it either answers
turns on a year-old cache (half of them starting a two-step workflow run by instant device
agents) or runs a burst of single-step jobs (as bench.peers does); prints the functions with
the most samples, inclusive and self, and our own functions inclusive. Asserts nothing.
`--workload chat`: bench.floor's turns instead (chit-chat, no workflow, on an empty state, 10 ms
after each answer). `--gil`: only samples of the thread holding the GIL (py-spy --gil). Without
it py-spy also counts a thread waiting inside SQLite's COMMIT (the fsync; the GIL released): a
bare INSERT + COMMIT loop (WAL, synchronous=FULL) sampled 226 us a commit where it used 128 us
of CPU, and a chit-chat run gave Commits._transaction 37 % of the samples (self) but 0.8 % with
--gil (perf: 6.5 % of the process's CPU in libsqlite3, 15 % in the kernel).

    .venv/bin/pip install py-spy
    .venv/bin/python -m bench.profile [--workload turns|chat|jobs] [--count 600] [--gil]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from a2a_common.sqlite import open_state_db
from bench.benchlib import instant_agents, runtime_stack, stop_all
from bench.floor_blocks import TEXTS as CHAT
from bench.peers import ours_block, warm_up
from bench.runtime import ROOT, turns
from bench.snapshot import fill
from edge.store.schema import MIGRATIONS
from sim.probe import MqttProbe

OURS = {"edge", "cache", "taskmanager", "sync", "cloud_client", "a2a_common"}
PROJECT = str(Path(__file__).resolve().parent.parent) + "/"


def short(frame: str) -> str:
    """`fn (path/to/file.py:12)` -> `fn (file.py)`, project paths kept relative."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0].rstrip(")")
    path = path.replace(PROJECT, "")
    if path.split("/")[0] not in OURS:
        path = path.rsplit("/", 1)[-1]
    return f"{name} ({path})"


def summarize(raw: Path, top: int) -> None:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [short(f) for f in stack.split(";") if f and not f.startswith("thread")]
        if not frames:
            continue
        n = int(count)
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    ours = Counter({f: n for f, n in inclusive.items() if f.split("(")[1].split("/")[0] in OURS})
    print(f"{total} samples of the runtime on CPU")
    for title, counter in (("inclusive", inclusive), ("self", own), ("our code, inclusive", ours)):
        print(f"  top {top} by {title} samples")
        for frame, n in counter.most_common(top):
            print(f"    {100 * n / total:5.1f} %  {frame}")


def chat(probe: MqttProbe, count: int) -> None:
    """bench.floor's turn block: chit-chat one at a time, 10 ms after each answer."""
    for n in range(count):
        probe.turn(f"c{n}", CHAT[n % 2])
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=["turns", "chat", "jobs"], default="turns")
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--gil", action="store_true", help="sample the GIL holder only")
    args = parser.parse_args()
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        sys.exit("py-spy is not installed: .venv/bin/pip install py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = open_state_db(work / "state" / "state.db", MIGRATIONS)
        if args.workload != "chat":
            fill(db)
        db.close()
        broker, cloud, runtime = runtime_stack(work)
        probe = MqttProbe(
            broker.port, [f"{ROOT}/turn/response", f"{ROOT}/workflow/event"], root=ROOT
        )
        agents = instant_agents(
            broker.port, ROOT, "mobility.move_to_room", "air_purifier.start", "speaker.say"
        )
        try:
            runtime.start()
            assert runtime.proc is not None
            time.sleep(0.5)
            raw = work / "profile.txt"
            recorder = subprocess.Popen(
                [
                    spy,
                    "record",
                    "-p",
                    str(runtime.proc.pid),
                    "-f",
                    "raw",
                    "-o",
                    str(raw),
                    "-r",
                    "500",
                    "--nonblocking",
                    *(["--gil"] if args.gil else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=(work / "py-spy.log").open("wb"),
            )
            time.sleep(1)
            if args.workload == "turns":
                turns(probe, args.count)
            elif args.workload == "chat":
                chat(probe, args.count)
            else:
                warm_up(probe, "speaker.say")
                ours_block(probe, 0, args.count, "speaker.say")
            recorder.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
            recorder.wait(30)
            summarize(raw, args.top)
            if args.raw:
                shutil.copy(raw, args.raw)
        finally:
            stop_all(agents, probe, runtime, cloud, broker)


if __name__ == "__main__":
    main()
