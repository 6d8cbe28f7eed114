"""The device's classifier of categories (SPEC §5.5) on the labelled evaluation set: recall and
precision per category, latency per text (p50/p99), resident memory it adds and its load time.

    .venv/bin/python -m bench.classifier [--set tests/fixtures/privacy_eval.jsonl]
        [--tree DIR] [--json] [--misses]
    .venv/bin/python -m bench.classifier --set tests/fixtures/privacy_holdout.jsonl
    .venv/bin/python -m bench.classifier --relabel

`--tree DIR` measures the `cache.lexicon` of another checkout (e.g. a worktree of an older
commit: `git worktree add /tmp/base <commit>`), so before and after run the same measurement.
Each run is a fresh interpreter (`python -c CHILD`): its RSS before importing the classifier,
after loading it (the shipped lexicon compiled) and after classifying every text; the load time
is the import plus the compile. Latency is given twice: wall clock (what a turn waits, but on a
shared machine its p99 is the scheduler's) and CPU time of the process (the classifier's own
cost). `--set` (alias `--eval`) names the labelled set: the evaluation set the lexicon was
tuned on, or the held-out one written blind after it (`privacy_holdout.jsonl`). Prints figures;
asserts nothing (the floors are tests/cache/test_classifier_floor.py and
test_classifier_holdout.py). `--relabel` times instead what a changed lexicon costs at
start: every stored text of a year of history (bench.snapshot's fill) labelled again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVAL_SET = ROOT / "tests" / "fixtures" / "privacy_eval.jsonl"
CATEGORIES = ("health", "vital", "home_layout", "contact")
REPEATS = 20  # each text classified this many times for the latency figures

CHILD = r"""
import json, sys, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
texts = json.loads(sys.stdin.read())
before = rss()
start = time.perf_counter()
from cache.lexicon import shipped
lexicon = shipped()
getattr(lexicon, "prepare", lambda: None)()
loaded = time.perf_counter() - start
after_load = rss()
labels = [lexicon.categories(t) for t in texts]
samples, cpu = [], []
for _ in range(REPEATS):
    for t in texts:
        a, c = time.perf_counter_ns(), time.process_time_ns()
        lexicon.categories(t)
        samples.append(time.perf_counter_ns() - a)
        cpu.append(time.process_time_ns() - c)
print(json.dumps({"labels": labels, "samples_ns": samples, "cpu_ns": cpu, "load_s": loaded,
                  "rss_load_kb": after_load - before, "rss_used_kb": rss() - before}))
"""


@dataclass(frozen=True)
class Score:
    tp: int
    fp: int
    fn: int

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0


def load_cases(path: Path = EVAL_SET) -> list[dict[str, Any]]:
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            cases.append(json.loads(line))
    return cases


def score(cases: Sequence[dict[str, Any]], labels: Sequence[Sequence[str]]) -> dict[str, Score]:
    """Per category: a text labelled with it and found is a true positive; found but not
    labelled, a false positive; labelled but not found, a false negative."""
    out = {}
    for category in CATEGORIES:
        tp = fp = fn = 0
        for case, found in zip(cases, labels, strict=True):
            want, got = category in case["categories"], category in found
            tp += want and got
            fp += got and not want
            fn += want and not got
        out[category] = Score(tp, fp, fn)
    return out


def misses(
    cases: Sequence[dict[str, Any]], labels: Sequence[Sequence[str]], category: str
) -> tuple[list[str], list[str]]:
    """(the texts labelled `category` and not found, those found and not labelled)."""
    missed = [
        c["text"]
        for c, f in zip(cases, labels, strict=True)
        if category in c["categories"] and category not in f
    ]
    extra = [
        c["text"]
        for c, f in zip(cases, labels, strict=True)
        if category in f and category not in c["categories"]
    ]
    return missed, extra


def measure(tree: Path, texts: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD.replace("REPEATS", str(REPEATS))],
        input=json.dumps(texts, ensure_ascii=False),
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def pct(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def relabel_year() -> None:
    """Time `relabel_if_changed` on a year of history whose fingerprint is not the lexicon's."""
    import tempfile
    import time

    from a2a_common.clock import ManualClock
    from a2a_common.sqlite import open_state_db
    from bench.snapshot import ITEMS, MIGRATIONS, NOW, PAIRS, fill
    from cache.memory import Memory, MemoryPolicy
    from cache.relabel import FINGERPRINT_KEY, relabel_if_changed

    with tempfile.TemporaryDirectory() as tmp:
        db = open_state_db(Path(tmp) / "state.db", MIGRATIONS)
        fill(db)
        memory = Memory(db=db, clock=ManualClock(NOW), policy=MemoryPolicy())
        memory.store.set_state(FINGERPRINT_KEY, "an older lexicon")
        wall, cpu = time.perf_counter(), time.process_time()
        done = relabel_if_changed(memory)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        db.close()
    print(f"relabel of a year ({PAIRS} pairs, {ITEMS} items): {wall:.3f} s wall, {cpu:.3f} s CPU")
    print(f"  {done}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", "--eval", dest="eval", type=Path, default=EVAL_SET)
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true", help="print the texts it got wrong")
    parser.add_argument("--relabel", action="store_true", help="time a re-label of a year")
    args = parser.parse_args(argv)
    if args.relabel:
        relabel_year()
        return
    cases = load_cases(args.eval)
    run = measure(args.tree, [c["text"] for c in cases])
    scores = score(cases, run["labels"])
    samples = run["samples_ns"]
    figures = {
        "tree": str(args.tree),
        "texts": len(cases),
        "per_category": {
            c: {"recall": round(s.recall, 3), "precision": round(s.precision, 3), **vars(s)}
            for c, s in scores.items()
        },
        "p50_ms": round(pct(samples, 0.50) / 1e6, 4),
        "p99_ms": round(pct(samples, 0.99) / 1e6, 4),
        "max_ms": round(max(samples) / 1e6, 4),
        "cpu_p50_ms": round(pct(run["cpu_ns"], 0.50) / 1e6, 4),
        "cpu_p99_ms": round(pct(run["cpu_ns"], 0.99) / 1e6, 4),
        "load_s": round(run["load_s"], 4),
        "rss_load_mb": round(run["rss_load_kb"] / 1024, 2),
        "rss_used_mb": round(run["rss_used_kb"] / 1024, 2),
    }
    if args.json:
        print(json.dumps(figures, ensure_ascii=False, indent=1))
        return
    print(f"classifier of {args.tree} on {args.eval.name} ({len(cases)} texts)")
    print(f"{'category':<12} {'recall':>7} {'precision':>9} {'tp':>4} {'fp':>4} {'fn':>4}")
    for c, s in scores.items():
        print(f"{c:<12} {s.recall:>7.3f} {s.precision:>9.3f} {s.tp:>4} {s.fp:>4} {s.fn:>4}")
    print(
        f"latency per text: p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms,"
        f" max {figures['max_ms']} ms ({REPEATS} x {len(cases)} texts);"
        f" CPU p50 {figures['cpu_p50_ms']} ms, p99 {figures['cpu_p99_ms']} ms"
    )
    print(
        f"load (import + compile): {figures['load_s']} s; RSS +{figures['rss_load_mb']} MB"
        f" loaded, +{figures['rss_used_mb']} MB after classifying every text"
    )
    if args.misses:
        for c in CATEGORIES:
            missed, extra = misses(cases, run["labels"], c)
            for text in missed:
                print(f"  {c} missed: {text}")
            for text in extra:
                print(f"  {c} extra:  {text}")


if __name__ == "__main__":
    main()
