"""Everywhere the category matters follows the classifier's answer (issue 33 item 4): the pair,
its session summary, the candidates it sources, the outbox, retention and the 30-day cap — at
write time, and again when a deployment's lexicon grows (cache/relabel.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from a2a_common.clock import ManualClock, parse_iso
from a2a_common.jsonx import canonical
from a2a_common.writes import SyncWrite
from cache.lexicon import parse_lexicon, shipped
from cache.memory import Memory
from cache.model import CandidateIn
from cache.privacy import PrivacyPolicy
from cache.relabel import relabel_if_changed
from edge.app.sync_sink import MemorySyncSink
from sync.core import Pending
from tests.cache.test_privacy_props import changes

REPRODUCED = ["엄마가 암에 걸렸어", "정신과 다녀왔어", "나 요즘 우울해", "아침약 챙겨줘"]
SESSION = "s-1"


def turn(
    memory: Memory, text: str, summary: str | None = None, **fields: Any
) -> tuple[str, list[SyncWrite]]:
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t-{text}", requested_session=SESSION, text=text
        )
        writes = memory.apply_turn(pair_id, session, changes(summary, None, **fields))
    return pair_id, writes


def pair_row(memory: Memory, pair_id: str) -> tuple[list[str], int, str | None, str]:
    cats, sensitive, expire_at, created_at = memory.db.execute(
        "SELECT categories, sensitive, expire_at, created_at FROM pairs WHERE pair_id = ?",
        [pair_id],
    ).fetchone()
    return json.loads(cats), sensitive, expire_at, created_at


def summary_categories(memory: Memory) -> list[str]:
    row = memory.db.execute(
        "SELECT summary_categories FROM sessions WHERE session_id = ?", [SESSION]
    ).fetchone()
    return list(json.loads(row[0]))


@pytest.mark.parametrize("said", REPRODUCED)
def test_at_write_time_every_tier_follows_the_classifier(memory: Memory, said: str) -> None:
    turn(memory, "거실 청정해줘")
    pair_id, writes = turn(
        memory,
        said,
        summary="사용자가 오늘 있었던 일을 말함",  # nothing the classifier knows
        profile_candidates=(CandidateIn("today", "들은 이야기"),),  # nor here
    )
    cats, sensitive, expire_at, created_at = pair_row(memory, pair_id)
    assert cats == ["health"] and sensitive == 1
    assert expire_at is not None  # the 30-day cap
    assert parse_iso(expire_at) - parse_iso(created_at) <= timedelta(days=30)
    assert "health" in summary_categories(memory)  # the summary carries its pairs'
    # the pair is not queued; its candidate is, on its own words (docs/design.md: an item is
    # labelled by its own words and the cloud's category, never by its source pair's)
    assert [w.kind for w in writes] == ["profile_candidate"]
    assert said not in json.dumps([w.payload for w in writes], ensure_ascii=False)
    snapshot = canonical(memory.snapshot(SESSION)).decode()
    assert said not in snapshot
    assert "오늘 있었던 일" not in snapshot
    assert "거실 청정해줘" in snapshot


def test_a_candidate_the_classifier_labels_makes_its_source_pair_sensitive(
    memory: Memory,
) -> None:
    pair_id, writes = turn(
        memory,
        "그거 매일 아침에 챙겨",  # nothing sensitive in the words
        profile_candidates=(CandidateIn("routine", "혈압약 아침 복용"),),  # no cloud category
    )
    assert writes == []
    item = memory.profile.items("routine")[0]
    assert item["category"] == "health"
    assert memory.labels.of_item(item["item_id"]) == ["health"]
    assert "health" in pair_row(memory, pair_id)[0]


SWELLING = "자고 나면 붓고 그래 MKW"  # no body part: 발목이 붓고 is shipped (a part and a symptom)


def test_a_grown_lexicon_relabels_the_pair_its_summary_the_outbox_and_the_cap(
    memory: Memory, clock: ManualClock
) -> None:
    assert shipped().categories(SWELLING) == []  # 붓다 is not shipped (부어: also "pour")
    pair_id, writes = turn(memory, SWELLING, summary="자고 나면 붓는다고 함 MKS")
    assert [w.kind for w in writes] == ["short_term_pair"]
    queued = [Pending(f"w{n}", w.kind, "", w.payload) for n, w in enumerate(writes)]
    sink = MemorySyncSink(memory)
    assert sink.withheld(queued) == []
    relabel_if_changed(memory)  # the shipped lexicon's fingerprint kept
    grown = shipped().extended(parse_lexicon({"health": [{"term": "붓다", "match": "predicate"}]}))
    memory.set_privacy(PrivacyPolicy(lexicon=grown))  # what a reload with lexicon_file does
    done = relabel_if_changed(memory)
    assert done is not None and done.pairs == 1
    cats, sensitive, expire_at, _ = pair_row(memory, pair_id)
    assert cats == ["health"] and sensitive == 1 and expire_at is not None
    assert "health" in summary_categories(memory)
    assert [p.write_id for p in queued] == sink.withheld(queued)  # the outbox holds it back
    snapshot = canonical(memory.snapshot(SESSION)).decode()
    assert "MKW" not in snapshot and "MKS" not in snapshot
    clock.advance(timedelta(days=31).total_seconds())  # retention: the cap removes it
    with memory.db.atomic():
        memory.sweeper.sweep_batch(memory.now(), None)
    assert memory.db.execute(
        "SELECT count(*) FROM pairs WHERE pair_id = ?", [pair_id]
    ).fetchone() == (0,)
