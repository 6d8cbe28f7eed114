"""Snapshot build on a year of history: ours (bounded, indexed reads) vs. a naive build that
loads every row and trims in Python; then the relevance-aware build (issue 19: focused on each
utterance of the routing cases) vs. today's unfocused one vs. a naive focus that scores every
confirmed item and every daily summary in Python. Prints figures; asserts nothing.

    .venv/bin/python -m bench.snapshot [--builds 1000] [--people 5]

With `--people N` (default 5; 0: none) it then builds for a household of N people with a year
each, in turn (bench/snapshot_people.py, SPEC §5.7).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from a2a_common.clock import ManualClock, iso
from a2a_common.db import Database
from a2a_common.jsonx import canonical, dumps
from a2a_common.sqlite import open_state_db
from bench.benchlib import pct, record
from cache.focus import focused
from cache.lexicon import shipped
from cache.memory import Memory, MemoryPolicy
from cache.model import CacheView, DailySummary, PairView, ProfileView, SyncPosition
from cache.relabel import FINGERPRINT_KEY
from cache.relevance import query
from cache.snapshot import build_snapshot
from edge.store.schema import MIGRATIONS

START = datetime(2025, 6, 24, 20, 0, tzinfo=UTC)
NOW = START + timedelta(days=365)
PAIRS, DAYS, WEEKS, ITEMS = 20_000, 365, 52, 500


def fill(db: Database) -> None:
    step = timedelta(days=365) / PAIRS
    with db.atomic():
        db.execute(
            "INSERT INTO sessions (session_id, started_at, last_turn_at, summary)"
            " VALUES ('session-year', ?, ?, ?)",
            [iso(START), iso(NOW), "오늘 사용자는 방 단위 청정 요청을 여러 번 했다."],
        )
        db.conn.executemany(
            "INSERT INTO pairs (pair_id, turn_id, session_id, user_text, assistant_text,"
            " route_family, status, created_at)"
            " VALUES (?, ?, 'session-year', ?, ?, 'ODL', 'ok', ?)",
            [
                (
                    f"pair-{i:06d}",
                    f"turn-{i}",
                    f"{i}번째: 안방으로 가서 청정해줘",
                    "안방으로 이동해서 청정을 시작할게요.",
                    iso(START + step * i),
                )
                for i in range(PAIRS)
            ],
        )
        db.conn.executemany(
            "INSERT INTO daily_summaries (summary_id, day, summary, updated_at)"
            " VALUES (?, ?, ?, ?)",
            [
                (
                    f"daily-{d}",
                    (START + timedelta(days=d)).date().isoformat(),
                    "저녁 시간대에 안방/거실 청정 요청이 반복됨",
                    iso(NOW),
                )
                for d in range(DAYS)
            ],
        )
        db.conn.executemany(
            "INSERT INTO weekly_digests (digest_id, week, digest, updated_at) VALUES (?, ?, ?, ?)",
            [
                (
                    f"weekly-{w}",
                    f"2026-W{w:02d}",
                    "최근 일주일간 방 단위 청정 요청이 반복됨",
                    iso(NOW),
                )
                for w in range(1, WEEKS + 1)
            ],
        )
        statuses = ["confirmed", "candidate", "suggestable", "revoked"]
        db.conn.executemany(
            "INSERT INTO profile_items (item_id, key, value, category, confidence,"
            " relevance_score, status, sensitive, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    f"profile-{i}",
                    f"key_{i}",
                    json.dumps(f"값 {i}", ensure_ascii=False),
                    "health" if i % 10 == 0 else "device_pattern",
                    0.8,
                    (i * 37 % 100) / 100,
                    statuses[i % 4],
                    int(i % 10 == 0),
                    iso(START),
                    iso(NOW),
                )
                for i in range(ITEMS)
            ],
        )
        db.execute("UPDATE sync_position SET cursor = 'cur-9000', version = 'v9000'")
        labelled(db)


def labelled(db: Database) -> None:
    """Keep the shipped lexicon's fingerprint, as a year-old DB has it (the runtime labelled
    each text as it was written): the runtime does not label the whole year again at start.
    The fill's texts carry no category of that lexicon, so the empty labels are its labels."""
    texts = [r[0] for r in db.execute("SELECT DISTINCT summary FROM daily_summaries")]
    texts += [r[0] for r in db.execute("SELECT DISTINCT digest FROM weekly_digests")]
    texts += [r[0] for r in db.execute("SELECT summary FROM sessions")]
    texts += [r[0] for r in db.execute("SELECT user_text || ' ' || assistant_text FROM pairs")]
    texts += [r[0] + " " + r[1] for r in db.execute("SELECT key, value FROM profile_items")]
    lexicon = shipped()
    assert not lexicon.categories(*texts), "the fill's texts must carry no category"
    db.execute(
        "INSERT INTO device_state (key, value) VALUES (?, ?)",
        [FINGERPRINT_KEY, dumps(lexicon.fingerprint())],
    )


def naive(db: Database, policy: MemoryPolicy) -> bytes:
    """Load everything, filter and sort in Python, then trim with the same builder."""
    stamp = iso(NOW)
    pairs = [
        r
        for r in db.execute(
            "SELECT user_text, assistant_text, route_family, status,"
            " created_at, expire_at FROM pairs"
        ).fetchall()
        if r[3] != "pending" and (r[5] is None or r[5] > stamp)
    ]
    pairs.sort(key=lambda r: r[4])
    daily = sorted(
        db.execute("SELECT day, summary, expire_at FROM daily_summaries").fetchall(), reverse=True
    )
    weeks = sorted(db.execute("SELECT week, digest FROM weekly_digests").fetchall(), reverse=True)
    items = [
        r
        for r in db.execute(
            "SELECT key, value, category, confidence, relevance_score,"
            " status, sensitive FROM profile_items"
        ).fetchall()
        if r[5] == "confirmed" and not r[6]
    ]
    items.sort(key=lambda r: (-r[4], r[0]))
    summary = db.execute("SELECT summary FROM sessions WHERE session_id = 'session-year'")
    view = CacheView(
        recent_pairs=tuple(PairView(u, a, r) for u, a, r, *_ in pairs),
        session_summary=summary.fetchone()[0],
        daily_summaries=tuple(DailySummary(d, s) for d, s, _ in daily),
        weekly_digest=weeks[0][1],
        profile_items=tuple(
            ProfileView(k, json.loads(v), c, conf, rel) for k, v, c, conf, rel, *_ in items
        ),
        sync=SyncPosition(*db.execute("SELECT cursor, version FROM sync_position").fetchone()),
    )
    return canonical(build_snapshot(view, policy.snapshot_budget_bytes, policy.recent_pairs))


ROUTING = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "routing_cases.json"


def utterances() -> list[tuple[str, dict[str, object]]]:
    cases = json.loads(ROUTING.read_text(encoding="utf-8"))["cases"]
    return [(c["text"], c.get("context") or {}) for c in cases]


def naive_focus(memory: Memory, text: str, context: dict[str, object]) -> bytes:
    """Read every confirmed item and every daily summary, score them all in Python."""
    view = memory.view("session-year", max_daily=DAYS)
    everything = memory.db.execute(
        "SELECT key, value, category, confidence, relevance_score, updated_at FROM profile_items"
        " WHERE status = 'confirmed' AND sensitive = 0 ORDER BY relevance_score DESC, key"
    ).fetchall()
    view = type(view)(
        recent_pairs=view.recent_pairs,
        session_summary=view.session_summary,
        daily_summaries=view.daily_summaries,
        weekly_digest=view.weekly_digest,
        profile_items=tuple(ProfileView(k, json.loads(v), *rest) for k, v, *rest in everything),
        sync=view.sync,
    )
    minute = int(NOW.timestamp() // 60)
    view = focused(view, query(text, context), standing=2, turn=minute)
    policy = memory.policy
    return canonical(build_snapshot(view, policy.snapshot_budget_bytes, policy.recent_pairs))


def focus_rows(memory: Memory, builds: int) -> list[tuple[str, list[float]]]:
    said = utterances()
    turns = [said[i % len(said)] for i in range(builds)]
    it = iter(turns * 2)

    def focused_build() -> bytes:
        text, context = next(it)
        return canonical(memory.snapshot("session-year", text, context))

    today = timed(lambda: canonical(memory.snapshot("session-year")), builds)
    ours = timed(focused_build, builds)
    naive_it = iter(turns)
    slow = timed(lambda: naive_focus(memory, *next(naive_it)), min(builds, 100))
    return [("today", today), ("focused", ours), ("naive-focus", slow)]


CPU_MS: dict[int, float] = {}  # id of a timed() result -> CPU ms per run (process time)


def timed(fn: object, runs: int) -> list[float]:
    """Wall ms of each run, sorted; the mean CPU ms per run is kept in CPU_MS (steadier than
    the wall clock on a shared machine)."""
    out = []
    cpu0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000)
    out.sort()
    CPU_MS[id(out)] = (time.process_time() - cpu0) * 1000 / runs
    return out


def row(name: str, values: list[float], width: int) -> str:
    return (
        f"{name:<{width}}{len(values):>6}{pct(values, 0.5):>10.3f}{pct(values, 0.99):>10.3f}"
        f"{statistics.fmean(values):>10.3f}{CPU_MS.get(id(values), 0.0):>10.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--builds", type=int, default=1000)
    parser.add_argument("--naive-builds", type=int, default=50)
    parser.add_argument("--people", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = open_state_db(Path(tmp) / "state.db", MIGRATIONS)
        t0 = time.perf_counter()
        fill(db)
        print(
            f"year of history: {PAIRS} pairs, {DAYS} daily summaries, {WEEKS} digests, "
            f"{ITEMS} profile items (filled in {time.perf_counter() - t0:.1f}s)"
        )
        clock = ManualClock(NOW)
        memory = Memory(db=db, clock=clock, policy=MemoryPolicy())
        ours_bytes = canonical(memory.snapshot("session-year"))
        assert ours_bytes == naive(db, memory.policy), "both builds must agree"
        ours = timed(lambda: canonical(memory.snapshot("session-year")), args.builds)
        slow = timed(lambda: naive(db, memory.policy), args.naive_builds)
        print(
            f"snapshot size: {len(ours_bytes)} bytes (budget {memory.policy.snapshot_budget_bytes})"
        )
        print(f"{'build':<8}{'runs':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'cpu ms':>10}")
        for name, values in (("ours", ours), ("naive", slow)):
            print(row(name, values, 8))
        print(
            f"naive / ours: p50 {pct(slow, 0.5) / pct(ours, 0.5):.0f}x, "
            f"p99 {pct(slow, 0.99) / pct(ours, 0.99):.0f}x"
        )
        print(f"relevance to the turn ({len(utterances())} routing-case utterances, in turn):")
        for name, values in focus_rows(memory, args.builds):
            print(row(name, values, 12))
            record("snapshot", f"{name}_p99_ms", round(pct(values, 0.99), 3))
        record("snapshot", "ours_p99_ms", round(pct(ours, 0.99), 3))
        db.close()
    if args.people:
        from bench.snapshot_people import run

        run(args.people, args.builds)


if __name__ == "__main__":
    main()
