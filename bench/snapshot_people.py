"""Snapshot build for a household (issue 34, SPEC §5.7): `people` persons with a year of history
each (bench/snapshot.py's year: 20,000 pairs, 365 daily summaries, 52 digests, 500 profile
items) plus the household's own year, built for turns that come from the persons and the
household in turn — the lasting view is per person, so a family talking in turns is the case
that matters. Each build is checked: no other person's marker in it.

    .venv/bin/python -m bench.snapshot_people [--people 5] [--builds 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from a2a_common.clock import ManualClock, iso
from a2a_common.db import Database
from a2a_common.jsonx import canonical
from a2a_common.people import HOUSEHOLD
from a2a_common.sqlite import open_state_db
from bench.benchlib import pct, record
from bench.snapshot import DAYS, ITEMS, NOW, PAIRS, START, WEEKS, labelled, row, timed, utterances
from cache.memory import Memory, MemoryPolicy
from edge.store.schema import MIGRATIONS


def marker(person: str) -> str:
    return f"MK{person}MK"


def fill_person(db: Database, person: str) -> None:
    """One person's year; every text carries the person's marker."""
    mark, step = marker(person), timedelta(days=365) / PAIRS
    session = f"session-{person}"
    db.execute(
        "INSERT INTO sessions (session_id, started_at, last_turn_at, summary, person_id)"
        " VALUES (?, ?, ?, ?, ?)",
        [session, iso(START), iso(NOW), f"오늘 {mark} 방 단위 청정 요청", person],
    )
    db.conn.executemany(
        "INSERT INTO pairs (pair_id, turn_id, session_id, user_text, assistant_text,"
        " route_family, status, created_at, person_id) VALUES (?, ?, ?, ?, ?, 'ODL', 'ok', ?, ?)",
        [
            (
                f"pair-{person}-{i:06d}",
                f"turn-{person}-{i}",
                session,
                f"{i}번째 {mark}: 안방으로 가서 청정해줘",
                "안방으로 이동해서 청정을 시작할게요.",
                iso(START + step * i),
                person,
            )
            for i in range(PAIRS)
        ],
    )
    db.conn.executemany(
        "INSERT INTO daily_summaries (summary_id, day, summary, updated_at, person_id)"
        " VALUES (?, ?, ?, ?, ?)",
        [
            (
                f"daily-{person}-{d}",
                (START + timedelta(days=d)).date().isoformat(),
                f"저녁 {mark} 안방/거실 청정 요청이 반복됨",
                iso(NOW),
                person,
            )
            for d in range(DAYS)
        ],
    )
    db.conn.executemany(
        "INSERT INTO weekly_digests (digest_id, week, digest, updated_at, person_id)"
        " VALUES (?, ?, ?, ?, ?)",
        [
            (f"weekly-{person}-{w}", f"2026-W{w:02d}", f"주간 {mark} 청정 요청", iso(NOW), person)
            for w in range(1, WEEKS + 1)
        ],
    )
    statuses = ["confirmed", "candidate", "suggestable", "revoked"]
    db.conn.executemany(
        "INSERT INTO profile_items (item_id, key, value, category, confidence,"
        " relevance_score, status, created_at, updated_at, person_id)"
        " VALUES (?, ?, ?, 'device_pattern', 0.8, ?, ?, ?, ?, ?)",
        [
            (
                f"profile-{person}-{i}",
                f"key_{i}",
                json.dumps(f"값 {mark} {i}", ensure_ascii=False),
                (i * 37 % 100) / 100,
                statuses[i % 4],
                iso(START),
                iso(NOW),
                person,
            )
            for i in range(ITEMS)
        ],
    )


def fill(db: Database, people: list[str]) -> None:
    with db.atomic():
        for person in [*people, HOUSEHOLD]:
            fill_person(db, person)
        db.execute("UPDATE sync_position SET cursor = 'cur-9000', version = 'v9000'")
        labelled(db)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--people", type=int, default=5)
    parser.add_argument("--builds", type=int, default=1000)
    args = parser.parse_args()
    run(args.people, args.builds)


def run(count: int, builds: int) -> None:
    people = [f"p{n}" for n in range(count)]
    with tempfile.TemporaryDirectory() as tmp:
        db = open_state_db(Path(tmp) / "state.db", MIGRATIONS)
        t0 = time.perf_counter()
        fill(db, people)
        print(
            f"{count} people and the household, a year each: "
            f"{PAIRS * (count + 1)} pairs, {ITEMS * (count + 1)} profile items "
            f"(filled in {time.perf_counter() - t0:.1f}s)"
        )
        memory = Memory(db=db, clock=ManualClock(NOW), policy=MemoryPolicy())
        said = utterances()
        speakers = [*people, HOUSEHOLD]
        turns = [
            (speakers[i % len(speakers)], *said[(i // len(speakers)) % len(said)])
            for i in range(builds * 2)
        ]
        it = iter(turns)
        others = {p: [marker(o) for o in speakers if o not in (p, HOUSEHOLD)] for p in speakers}

        def build() -> bytes:
            person, text, context = next(it)
            out = canonical(memory.snapshot(f"session-{person}", text, context, person))
            text_out = out.decode("utf-8")
            assert not any(m in text_out for m in others[person]), person
            assert person == HOUSEHOLD or marker(person) in text_out, person
            return out

        unfocused = timed(
            lambda: canonical(memory.snapshot("session-p0", None, None, "p0")), builds
        )
        focused = timed(build, builds)
        print(f"{'build':<22}{'runs':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'cpu ms':>10}")
        print(row("one person, today", unfocused, 22))
        print(row("people in turn, focused", focused, 22))
        record("snapshot", f"people{count}_focused_p99_ms", round(pct(focused, 0.99), 3))
        db.close()


if __name__ == "__main__":
    main()
