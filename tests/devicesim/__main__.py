"""`python -m tests.devicesim run --seed N --steps K [--skip 3,5-9]` (one seed; on a failure its
trace's tail, then the shortest failing run the shrinker finds and the line that replays it) and
`python -m tests.devicesim long --seeds N --minutes M --steps K` (as many seeds as the time
allows, each failure shrunk, then the figures: steps per second, inputs and faults drawn, every
oracle's checks)."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tests.devicesim.run import SimFailure, parse_spans, run_seed
from tests.devicesim.shrink import shrink


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.devicesim")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one seed")
    one.add_argument("--seed", type=int, required=True)
    one.add_argument("--steps", type=int, default=500)
    one.add_argument("--trace", action="store_true", help="print the whole step log")
    one.add_argument("--skip", default="", help="steps left out, as a shrunk replay prints them")
    one.add_argument(
        "--stream", choices=("step", "one"), default="step", help="one: seeds found before Dec 5"
    )
    many = sub.add_parser("long", help="many seeds, with figures")
    for command in (one, many):
        command.add_argument(
            "--shrink-runs", type=int, default=200, help="runs the shrinker may take (0: none)"
        )
    many.add_argument("--seeds", type=int, default=1000)
    many.add_argument("--first", type=int, default=1)
    many.add_argument("--steps", type=int, default=500)
    many.add_argument("--minutes", type=float, default=30.0)
    args = parser.parse_args(argv)
    if args.command == "run":
        try:
            sim = run_seed(args.seed, args.steps, skip=parse_spans(args.skip), stream=args.stream)
        except SimFailure as exc:
            print(exc)
            if args.shrink_runs:
                print(shrink(exc, max_runs=args.shrink_runs).report())
            return 1
        if args.trace:
            print("\n".join(sim.trace))
        print(f"seed {args.seed}: {sim.step} steps, no oracle violated")
        return 0
    return _long(args.first, args.seeds, args.steps, args.minutes, args.shrink_runs)


def _long(first: int, seeds: int, steps: int, minutes: float, shrink_runs: int) -> int:
    started = time.monotonic()
    total_steps, done, failed = 0, 0, []
    inputs: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    checks: Counter[str] = Counter()
    crashes = 0
    for seed in range(first, first + seeds):
        if time.monotonic() - started > minutes * 60:
            break
        try:
            sim = run_seed(seed, steps)
        except SimFailure as exc:
            failed.append(seed)
            print(str(exc).splitlines()[0] + "\n" + "\n".join(str(exc).splitlines()[1:4]))
            if shrink_runs:
                print(shrink(exc, max_runs=shrink_runs).report())
            continue
        done += 1
        total_steps += sim.step
        inputs.update(sim.inputs)
        faults.update(sim.faults)
        checks.update(sim.checks)
        crashes += sim.crashes
    elapsed = time.monotonic() - started
    print(f"seeds run: {done + len(failed)} ({first}..), passed {done}, failed {failed}")
    print(f"steps: {total_steps} in {elapsed:.0f}s = {total_steps / elapsed:.0f} steps/s")
    print("inputs: " + ", ".join(f"{k} {v}" for k, v in sorted(inputs.items())))
    print("faults: " + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    print("oracle checks: " + ", ".join(f"{k} {v}" for k, v in sorted(checks.items())))
    print(f"crashes: {crashes}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
