"""SPEC §5.7 in the cache: memory that belongs to a person and never reaches another's snapshot.

Two people (엄마, 아들) and the household (a guest, an unsure voice, the device's own
observations). Each test names the rule it holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from freezegun import freeze_time

from a2a_common.clock import ManualClock, SystemClock
from a2a_common.jsonx import canonical
from a2a_common.people import HOUSEHOLD, person_of
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from cache.update import UpdateInput, plan_update
from edge.store.schema import MIGRATIONS

MOM, SON = "엄마", "son-1"
ROOM = CandidateIn("preferred_room", "안방", "device_pattern", 0.7)
ACCEPT = CandidateIn("preferred_room", "안방", "device_pattern", 0.9, "suggestion_accepted")
SONG = CandidateIn("favorite_song", "노래B", "preference", 0.8)
PILL = CandidateIn("morning_pill", "혈압약 8시", "health", 0.9)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Memory]:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    yield Memory(db=db, clock=SystemClock(), policy=MemoryPolicy())
    db.close()


def say(
    m: Memory,
    when: str,
    text: str,
    person: str = HOUSEHOLD,
    cand: CandidateIn | None = None,
    *,
    summary: str | None = None,
) -> tuple[str, str, list[str]]:
    """One turn of `person` at `when`, answered by a planner whose update carries `cand`
    (through `apply_turn`, as the runtime applies it); (pair, session, sync write kinds)."""
    with freeze_time(when), m.db.atomic():
        pair, session = m.record_utterance(
            turn_id=f"{person}-{when}", requested_session=None, text=text, person=person
        )
        changes = plan_update(
            UpdateInput(
                reply_text="네",
                route_family="ODL",
                profile_candidates=(cand,) if cand else (),
                session_summary=summary or "",
            ),
            m.sync_position(),
            frozenset(),
        )
        writes = m.apply_turn(pair, session, changes)
    return pair, session, [w.kind for w in writes]


def snap(m: Memory, when: str, person: str, text: str = "") -> bytes:
    with freeze_time(when):
        if text:
            return canonical(m.snapshot_for(text, None, person))
        return canonical(m.snapshot(None, None, None, person))


def items(m: Memory, when: str, person: str) -> list[tuple[str, object]]:
    with freeze_time(when):
        out = m.snapshot(None, person=person)["long_term"]["profile_items"]
    return [(i["key"], i["value"]) for i in out]


def test_speaker_below_the_confidence_or_absent_is_the_household() -> None:
    assert person_of(MOM, 0.8, 0.8) == MOM
    assert person_of(MOM, 0.79, 0.8) == HOUSEHOLD
    assert person_of(None, None, 0.8) == HOUSEHOLD


def test_the_seed_scenario_keeps_its_exact_result_for_a_person(live: Memory) -> None:
    """Days 1, 2, 4 mentions, day 6 acceptance, all 엄마's: confirmed for her only, with her
    four pairs as sources; the household and 아들 never see it."""
    d1, *_ = say(live, "2026-06-01T11:00:00Z", "안방 청정해줘", MOM, ROOM)
    d2, *_ = say(live, "2026-06-02T11:00:00Z", "안방 좀 깨끗하게 해줘", MOM, ROOM)
    d4, *_ = say(live, "2026-06-04T13:00:00Z", "잘 때는 안방 먼저 청정해", MOM, ROOM)
    assert items(live, "2026-06-05T11:00:00Z", MOM) == []
    d6, _, kinds = say(live, "2026-06-06T11:00:00Z", "응, 안방 청정 시작해", MOM, ACCEPT)
    assert "profile_confirmed" in kinds
    assert items(live, "2026-06-06T12:00:00Z", MOM) == [("preferred_room", "안방")]
    assert items(live, "2026-06-06T12:00:00Z", SON) == []
    assert items(live, "2026-06-06T12:00:00Z", HOUSEHOLD) == []
    item = live.profile.item("preferred_room", "안방", MOM)
    assert item is not None and item["person_id"] == MOM
    assert json.loads(item["source_pair_ids"]) == [d1, d2, d4, d6]
    assert live.profile.item("preferred_room", "안방") is None  # nothing for the household


def test_two_peoples_single_mentions_are_never_one_persons_two(live: Memory) -> None:
    """엄마 on days 1 and 2, 아들 on day 4, then 엄마 accepts: before it she has two mentions
    on two days — not suggestable, so her acceptance confirms nothing; 아들's one neither."""
    say(live, "2026-06-01T11:00:00Z", "안방 청정해줘", MOM, ROOM)
    say(live, "2026-06-02T11:00:00Z", "안방 좀 깨끗하게 해줘", MOM, ROOM)
    say(live, "2026-06-04T13:00:00Z", "안방 먼저 청정해", SON, ROOM)
    say(live, "2026-06-06T11:00:00Z", "응, 안방 청정 시작해", MOM, ACCEPT)
    for person in (MOM, SON, HOUSEHOLD):
        assert items(live, "2026-06-06T12:00:00Z", person) == []
    mom = live.profile.item("preferred_room", "안방", MOM)
    son = live.profile.item("preferred_room", "안방", SON)
    # counted together, three mentions on three days before the acceptance would confirm
    assert mom is not None and mom["status"] == "suggestable"  # her 3 rows, the acceptance's too
    assert son is not None and son["status"] == "candidate"


def test_a_snapshot_holds_the_persons_tiers_and_the_households_never_anothers(
    live: Memory,
) -> None:
    say(live, "2026-06-01T01:00:00Z", "엄마말MARKER-A 안방 청정", MOM, summary="엄마요약MARKER-A")
    say(live, "2026-06-01T01:01:00Z", "아들말MARKER-B 노래 틀어줘", SON, summary="아들요약MARKER-B")
    say(live, "2026-06-01T01:02:00Z", "손님말MARKER-H 불 켜줘")
    with live.db.atomic():
        live.tiers.apply_updates(
            {
                "person_id": MOM,
                "daily_summaries": [{"day": "2026-06-01", "summary": "엄마하루MARKER-A"}],
                "profile_items": [{"key": "favorite_song", "value": "노래A-MARKER-A"}],
            }
        )
        live.tiers.apply_updates(
            {
                "daily_summaries": [
                    {"day": "2026-06-01", "summary": "아들하루MARKER-B", "person_id": SON},
                    {"day": "2026-06-01", "summary": "집하루MARKER-H"},
                ],
                "profile_items": [
                    {"key": "favorite_song", "value": "노래B-MARKER-B", "person_id": SON},
                    {"key": "wifi_room", "value": "거실-MARKER-H"},
                ],
            }
        )
    when = "2026-06-01T02:00:00Z"
    mom, son, home = snap(live, when, MOM), snap(live, when, SON), snap(live, when, HOUSEHOLD)
    for text in (mom, son, home):
        assert b"MARKER-H" in text  # the household's is everyone's
    assert b"MARKER-A" in mom and b"MARKER-B" not in mom
    assert b"MARKER-B" in son and b"MARKER-A" not in son
    assert b"MARKER-A" not in home and b"MARKER-B" not in home  # a guest hears nothing personal
    for turn_snap in (snap(live, when, MOM, "노래 틀어줘"), snap(live, when, SON, "노래 틀어줘")):
        assert turn_snap.count(b"MARKER-A") + turn_snap.count(b"MARKER-B") > 0
    assert b"MARKER-B" not in snap(live, when, MOM, "노래B 틀어줘 아들 노래")
    # the seed's shape is unchanged
    assert set(json.loads(mom)) == {"source", "short_term", "mid_term", "long_term", "sync"}


def test_sessions_are_per_person(live: Memory) -> None:
    _, mom1, _ = say(live, "2026-06-01T01:00:00Z", "안방", MOM)
    _, son1, _ = say(live, "2026-06-01T01:01:00Z", "노래", SON)
    _, mom2, _ = say(live, "2026-06-01T01:02:00Z", "거실", MOM)
    assert mom1 == mom2 and son1 != mom1
    # a turn that names another person's session gets a session of its own
    with freeze_time("2026-06-01T01:03:00Z"), live.db.atomic():
        _, taken = live.record_utterance(
            turn_id="x", requested_session=mom1, text="끼어들기", person=SON
        )
    assert taken == son1
    rows = live.db.execute(
        "SELECT session_id, count(DISTINCT person_id) FROM pairs GROUP BY session_id"
    ).fetchall()
    assert all(n == 1 for _, n in rows)


def test_a_persons_health_item_goes_only_to_them_under_their_grant(tmp_path: Path) -> None:
    grants: dict[str, set[str]] = {HOUSEHOLD: set(), MOM: set(), SON: set()}
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    m = Memory(
        db=db,
        clock=SystemClock(),
        policy=MemoryPolicy(),
        consents=lambda person: frozenset(grants.get(person, set())),
    )
    with db.atomic():
        m.tiers.apply_updates({"person_id": MOM, "profile_items": [PILL.__dict__]})
    when = "2026-06-01T02:00:00Z"
    assert all(b"morning_pill" not in snap(m, when, p) for p in (MOM, SON, HOUSEHOLD))
    grants[HOUSEHOLD].add("health")  # the household's grant covers the household's only
    grants[SON].add("health")  # and 아들's covers his own
    assert all(b"morning_pill" not in snap(m, when, p) for p in (MOM, SON, HOUSEHOLD))
    grants[MOM].add("health")
    assert b"morning_pill" in snap(m, when, MOM)
    assert b"morning_pill" not in snap(m, when, SON)
    assert b"morning_pill" not in snap(m, when, HOUSEHOLD)
    db.close()


def test_what_the_device_observes_is_the_households(live: Memory) -> None:
    pair, session, _ = say(live, "2026-06-01T01:00:00Z", "안방 청정해줘", MOM)
    with freeze_time("2026-06-01T01:05:00Z"), live.db.atomic():
        live.observe([ROOM], pair_id=pair, session_id=session)
    assert live.profile.item("preferred_room", "안방", HOUSEHOLD) is not None
    assert live.profile.item("preferred_room", "안방", MOM) is None


def test_sync_writes_carry_the_person(live: Memory) -> None:
    pair, _, kinds = say(live, "2026-06-01T01:00:00Z", "노래B 틀어줘", SON, SONG)
    assert kinds == ["short_term_pair", "profile_candidate"]
    assert live.store.pair_write(pair).payload["person_id"] == SON
    with freeze_time("2026-06-01T01:00:00Z"), live.db.atomic():
        writes = live.profile.add_evidence(
            SONG, pair_id=pair, session_id="s", source="cloud", person=SON
        )
    assert writes == []  # the same pair counted once
    item = live.profile.item("favorite_song", "노래B", SON)
    assert item is not None and item["person_id"] == SON


def test_forgetting_a_person_leaves_the_others_whole(live: Memory) -> None:
    say(live, "2026-06-01T01:00:00Z", "엄마말MARKER-A 안방", MOM, ROOM, summary="요약MARKER-A")
    say(live, "2026-06-01T01:01:00Z", "아들말MARKER-B 노래", SON, SONG, summary="요약MARKER-B")
    say(live, "2026-06-01T01:02:00Z", "손님말MARKER-H")
    with live.db.atomic():
        live.tiers.apply_updates(
            {
                "person_id": MOM,
                "daily_summaries": [{"day": "2026-06-01", "summary": "하루MARKER-A"}],
                "weekly_digest": {"week": "2026-W23", "digest": "주간MARKER-A"},
            }
        )
    before_son = snap(live, "2026-06-01T02:00:00Z", SON)
    with live.db.atomic():
        gone = live.forgetter.forget("person", MOM)
    assert (len(gone.pairs), len(gone.sessions), len(gone.items), gone.summaries) == (1, 1, 1, 2)
    assert gone.tombstone().payload["scope"] == "person"
    dump = "\n".join(live.db.conn.iterdump())
    assert "MARKER-A" not in dump
    assert "MARKER-B" in dump and "MARKER-H" in dump
    assert snap(live, "2026-06-01T02:00:00Z", SON) == before_son
    counts = live.store.people_counts()
    assert MOM not in counts and counts[SON]["pairs"] == 1


def test_an_existing_cache_becomes_the_households_nothing_lost(tmp_path: Path) -> None:
    """`cache_0007_people` on a DB of the release before it (schema as it left it): every row
    of every tier is the household's, the evidence is all there (not cascaded away by the
    rebuild), and the snapshot still carries what it carried."""
    path = tmp_path / "state.db"
    before = [m.name for m in MIGRATIONS].index("cache_0007_people")
    db = open_state_db(path, MIGRATIONS[:before])
    db.executescript(
        """
        INSERT INTO sessions (session_id, started_at, last_turn_at, summary)
            VALUES ('s1', '2026-06-01T00:00:00Z', '2026-06-01T00:00:00Z', '요약');
        INSERT INTO pairs (pair_id, turn_id, session_id, user_text, assistant_text, status,
            created_at) VALUES ('p1', 't1', 's1', '안방 청정해줘', '네', 'ok',
            '2026-06-01T00:00:00Z');
        INSERT INTO daily_summaries (summary_id, day, summary, updated_at)
            VALUES ('daily-2026-06-01', '2026-06-01', '하루', '2026-06-01T00:00:00Z');
        INSERT INTO weekly_digests (digest_id, week, digest, updated_at)
            VALUES ('weekly-2026-W23', '2026-W23', '주간', '2026-06-01T00:00:00Z');
        INSERT INTO profile_items (item_id, key, value, status, source_pair_ids, created_at,
            updated_at, confirmed_at) VALUES ('i1', 'preferred_room', '"안방"', 'confirmed',
            '["p1"]', 'T0', 'T1', 'T1');
        INSERT INTO profile_evidence (candidate_id, item_id, pair_id, session_id, day, kind,
            source, created_at) VALUES ('c1', 'i1', 'p1', 's1', '2026-06-01', 'mention',
            'cloud', 'T0');
        """
    )
    db.conn.commit()
    db.close()
    db = open_state_db(path, MIGRATIONS)
    for table in (
        "pairs",
        "sessions",
        "daily_summaries",
        "weekly_digests",
        "profile_items",
        "profile_evidence",
    ):
        assert db.execute(f"SELECT DISTINCT person_id FROM {table}").fetchall() == [(HOUSEHOLD,)], (
            table
        )
    assert db.execute("SELECT candidate_id, item_id FROM profile_evidence").fetchall() == [
        ("c1", "i1")
    ]
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    clock = ManualClock()
    m = Memory(db=db, clock=clock, policy=MemoryPolicy())
    out = m.snapshot("s1")
    assert out["short_term"]["recent_pairs"] == [{"user": "안방 청정해줘", "assistant": "네"}]
    assert out["short_term"]["session_summary"] == "요약"
    assert out["mid_term"] == {
        "daily_summaries": [{"day": "2026-06-01", "summary": "하루"}],
        "weekly_digest": "주간",
    }
    assert out["long_term"]["profile_items"] == [{"key": "preferred_room", "value": "안방"}]
    # a person's summary of the same day is now a second row, not a replacement
    with db.atomic():
        m.tiers.put_daily("2026-06-01", "엄마 하루", person=MOM)
    assert db.execute("SELECT count(*) FROM daily_summaries").fetchone()[0] == 2
    db.close()


def test_a_persons_session_scoped_words_outlive_another_persons_new_session(
    tmp_path: Path,
) -> None:
    """`store: session` words end with their session — their own person's session: 아들
    starting his session, or the retention sweep, does not end 엄마's, which goes on."""
    from cache.privacy import CategoryPolicy, PrivacyPolicy
    from edge.app.memory_ops import MemoryOps
    from sync import SyncOutbox

    privacy = PrivacyPolicy(categories={"diary": CategoryPolicy("session", share=True)})
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    m = Memory(db=db, clock=SystemClock(), policy=MemoryPolicy(privacy=privacy))

    def diary(when: str, person: str) -> None:
        with freeze_time(when), m.db.atomic():
            pair, session = m.record_utterance(
                turn_id=f"{person}-{when}", requested_session=None, text="일기", person=person
            )
            changes = plan_update(
                UpdateInput(reply_text="네", route_family="DEF", pair_category="diary"),
                m.sync_position(),
                frozenset(),
            )
            m.apply_turn(pair, session, changes)

    def kept(person: str) -> int:
        rows = db.execute("SELECT count(*) FROM pairs WHERE person_id = ?", [person])
        return int(rows.fetchone()[0])

    clock = SystemClock()  # freezegun moves it
    ops = MemoryOps(memory=m, sync_outbox=SyncOutbox(db=db, clock=clock), clock=clock)

    diary("2026-06-01T01:00:00Z", MOM)
    diary("2026-06-01T01:05:00Z", SON)  # his first session: hers goes on
    with freeze_time("2026-06-01T01:06:00Z"), m.db.atomic():
        ops.sweep()  # the app's retention pass
    assert (kept(MOM), kept(SON)) == (1, 1)
    with freeze_time("2026-06-01T03:00:00Z"), m.db.atomic():  # both sessions idle now
        ops.sweep()
    assert (kept(MOM), kept(SON)) == (0, 0)
    db.close()


def test_a_sync_write_is_screened_under_its_persons_consent(tmp_path: Path) -> None:
    """The replayer's last screen (`MemorySyncSink.withheld`) reads the consent of the person a
    write belongs to: the household's grant of a shared sensitive category lets the household's
    pair go, never a person's."""
    from cache.privacy import CategoryPolicy, PrivacyPolicy
    from edge.app.sync_sink import MemorySyncSink
    from sync import Pending

    privacy = PrivacyPolicy(categories={"health": CategoryPolicy("days:30", share=True)})
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    grants = {HOUSEHOLD: frozenset({"health"})}
    m = Memory(
        db=db,
        clock=SystemClock(),
        policy=MemoryPolicy(privacy=privacy),
        consents=lambda person: grants.get(person, frozenset()),
    )
    pairs = {}
    for person in (HOUSEHOLD, MOM):
        pairs[person], _, _ = say(m, "2026-06-01T01:00:00Z", "혈압약 먹었어", person)
    pending = [
        Pending(f"w-{p}", "short_term_pair", "T", m.store.pair_write(pair).payload)
        for p, pair in pairs.items()
    ]
    assert MemorySyncSink(m).withheld(pending) == [f"w-{MOM}"]
    db.close()
