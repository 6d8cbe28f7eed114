"""Stored texts labelled again when the lexicon changes (cache/relabel.py): a term added later
(privacy.lexicon_file + reload, or an upgrade's new terms) hides what was stored before it."""

from __future__ import annotations

import time
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.jsonx import canonical
from a2a_common.sqlite import open_state_db
from cache.lexicon import parse_lexicon, shipped
from cache.memory import Memory, MemoryPolicy
from cache.privacy import PrivacyPolicy
from cache.relabel import FINGERPRINT_KEY, relabel_if_changed
from edge.app.sync_sink import MemorySyncSink
from edge.store.schema import MIGRATIONS
from sync.core import Pending
from tests.cache.test_privacy_props import changes

GOUT = shipped().extended(parse_lexicon({"health": ["통풍"]}))


def test_a_new_term_relabels_every_stored_tier_and_withholds_the_queued_write(
    memory: Memory,
) -> None:
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id="t1", requested_session="s-1", text="통풍 때문에 MKP"
        )
        writes = memory.apply_turn(pair_id, session, changes("요즘 통풍 MKS", None))
        memory.tiers.put_daily("2026-06-10", "통풍 얘기 MKD", source_session_ids=[])
        memory.tiers.apply_updates({"profile_items": [{"key": "condition", "value": "통풍 MKI"}]})
    before = canonical(memory.snapshot(session)).decode()
    assert all(m in before for m in ("MKP", "MKS", "MKD", "MKI"))  # unknown word: shown
    sink = MemorySyncSink(memory)
    queued = [Pending(f"w{n}", w.kind, "", w.payload) for n, w in enumerate(writes)]
    pair_writes = [p.write_id for p in queued if p.kind == "short_term_pair"]
    assert pair_writes and sink.withheld(queued) == []
    assert relabel_if_changed(memory) is not None  # no fingerprint yet: labelled once
    assert relabel_if_changed(memory) is None  # the same lexicon: nothing to do
    memory.set_privacy(PrivacyPolicy(lexicon=GOUT))  # what a reload with lexicon_file does
    done = relabel_if_changed(memory)
    assert done is not None and done.pairs == 1 and done.items == 1
    after = canonical(memory.snapshot(session)).decode()
    for marker in ("MKP", "MKS", "MKD", "MKI"):
        assert marker not in after, (marker, after)
    assert set(pair_writes) <= set(sink.withheld(queued))  # the replayer asks per batch
    assert memory.state(FINGERPRINT_KEY) == GOUT.fingerprint()
    assert GOUT.fingerprint() != shipped().fingerprint()


def test_ten_thousand_pairs_are_relabelled_in_a_few_seconds(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS, synchronous="NORMAL")
    memory = Memory(db=db, clock=ManualClock(), policy=MemoryPolicy())
    with db.atomic():
        for n in range(10_000):
            memory.record_utterance(
                turn_id=f"t{n}", requested_session=f"s-{n // 20}", text=f"거실 청정 {n} 통풍"
            )
    memory.store.set_state(FINGERPRINT_KEY, shipped().fingerprint())
    memory.set_privacy(PrivacyPolicy(lexicon=GOUT))
    started = time.perf_counter()
    done = relabel_if_changed(memory)
    took = time.perf_counter() - started
    print(f"relabel of 10,000 pairs: {took:.2f} s")
    assert done is not None and done.pairs == 10_000
    assert db.execute("SELECT count(*) FROM pairs WHERE sensitive = 1").fetchone()[0] == 10_000
    assert took < 10
    db.close()
