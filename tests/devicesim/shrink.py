"""Shrinking a failing seed: the fewest steps with a fault or an input that still break the same
oracle. A step left out (`Sim.skip`) still draws its fault and its input, so the steps before it
stay the seed's own; what comes after may differ (an input's own draws are not made) — each
candidate is a run of its own, replayed by the one line printed.

The search is delta debugging (Zeller's ddmin, on the steps): leave out halves, then quarters,
…, then single steps, keeping every cut after which the run still fails the same oracle, and
cut the run at the step it fails; bounded by a number of runs."""

from __future__ import annotations

from dataclasses import dataclass

from tests.devicesim.run import SimFailure, replay_command, run_seed

TRACE_LINES = 60  # of the shrunk run's inputs and faults, printed


@dataclass
class Shrunk:
    seed: int
    steps: int
    skip: frozenset[int]
    stream: str
    oracles: frozenset[str]
    runs: int
    trace: list[str]

    @property
    def kept(self) -> int:
        """Steps that do a fault or an input."""
        return self.steps - len(self.skip)

    @property
    def command(self) -> str:
        return replay_command(self.seed, self.steps, self.skip, self.stream)

    def report(self) -> str:
        lines = [line for line in self.trace if _said(line)]
        shown = lines[-TRACE_LINES:]
        cut = f" (the last {len(shown)})" if len(lines) > len(shown) else ""
        head = [
            f"shrunk: {self.kept} of {self.steps} steps kept ({self.runs} runs), still "
            f"{', '.join(sorted(self.oracles))}",
            f"replay: {self.command}",
            f"its inputs and faults{cut}:",
        ]
        return "\n".join(head + ["  " + line for line in shown])


def _said(line: str) -> bool:
    """A trace line that is an input or a fault (not the wire's digest, not an agent)."""
    what = line.split(maxsplit=2)[-1]
    return not what.startswith(("out ", "agent ", "quiet"))


def _fails(
    seed: int, steps: int, skip: frozenset[int], oracles: frozenset[str], stream: str
) -> int | None:
    """The step the run fails at with one of `oracles`, or None."""
    try:
        run_seed(seed, steps, skip=skip, stream=stream)
    except SimFailure as exc:
        if oracles & {v.oracle for v in exc.sim.violation}:
            return exc.sim.step
    return None


def shrink(failure: SimFailure, *, max_runs: int = 300) -> Shrunk:
    """The shortest failing run ddmin finds within `max_runs` runs."""
    sim = failure.sim
    seed, steps, skip, stream = sim.seed, sim.step, sim.skip, sim.stream
    oracles = frozenset(v.oracle for v in sim.violation)
    runs = 0
    chunk = max(1, (steps - len(skip)) // 2)
    while runs < max_runs:
        kept = [n for n in range(1, steps + 1) if n not in skip]
        progress = False
        for start in range(0, len(kept), chunk):
            if runs >= max_runs:
                break
            cut = frozenset(kept[start : start + chunk])
            runs += 1
            failed_at = _fails(seed, steps, skip | cut, oracles, stream)
            if failed_at is not None:
                steps = failed_at
                skip = frozenset(n for n in skip | cut if n <= steps)
                progress = True
                break
        if not progress:
            if chunk == 1:
                break
            chunk = max(1, chunk // 2)
        else:
            chunk = min(chunk, max(1, (steps - len(skip)) // 2))
    trace: list[str] = []
    try:
        trace = run_seed(seed, steps, skip=skip, stream=stream).trace
    except SimFailure as exc:
        trace = exc.sim.trace
    return Shrunk(seed, steps, skip, stream, oracles, runs, trace)
