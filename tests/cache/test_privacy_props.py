"""Property: for any cache, policy and consent, no text of an unconsented sensitive category or
of a `share: false` category is in a snapshot, nor in a sync request body (built from the
outbox by the real replayer). The oracle below is independent of `cache.privacy`: it says
which texts are tainted from what the test put in (terms, cloud categories, provenance)."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_common.clock import ManualClock
from a2a_common.jsonx import canonical
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from cache.privacy import SENSITIVE_DEFAULT, CategoryPolicy, PrivacyPolicy
from cache.update import UpdateChanges
from edge.app.sync_sink import MemorySyncSink
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox
from sync.replay import Replayer
from tests.cache.evasions import evaded_term
from tests.examples import examples

TERMS = {"health": "혈압", "vital": "맥박", "home_layout": "비밀번호", "contact": "전화번호"}
CATEGORIES = [*TERMS, "hobby", "device_pattern"]
SESSIONS = ["session-a", "session-b"]

# the category whose word the text holds, and the word: one of the lexicon's own terms, evaded
# (full-width, mixed case, zero-width and soft-hyphen characters, spaced out, run together)
term = st.one_of(
    st.none(), st.sampled_from(list(TERMS)).flatmap(lambda c: st.tuples(st.just(c), evaded_term(c)))
)
cloud_cat = st.sampled_from([None, *CATEGORIES])
entry = st.one_of(
    st.none(),
    st.builds(
        CategoryPolicy,
        st.sampled_from(["forever", "days:10", "never", "session"]),
        st.booleans(),
    ),
)
turn_s = st.fixed_dictionaries(
    {
        "session": st.sampled_from(SESSIONS),
        "term": term,
        "pair_cat": cloud_cat,
        "summary": st.one_of(st.none(), st.tuples(term, cloud_cat)),
        "candidate": st.one_of(st.none(), st.tuples(term, cloud_cat)),
    }
)
daily_s = st.tuples(term, cloud_cat, st.lists(st.sampled_from(SESSIONS), max_size=2, unique=True))
item_s = st.tuples(term, cloud_cat, st.lists(st.integers(0, 7), max_size=2))


@dataclass
class Oracle:
    policy: dict[str, CategoryPolicy | None]
    consent: frozenset[str]
    marks: dict[str, set[str]] = field(default_factory=dict)  # marker -> its categories
    n: int = 0

    def text(self, term: tuple[str, str] | None, *cats: str | None) -> tuple[str, str]:
        self.n += 1
        marker = f"MK{self.n:03d}Q"
        self.marks[marker] = {c for c in (term[0] if term else None, *cats) if c}
        return marker, f"{marker} {term[1] if term else '청정'}"

    def visible(self, cat: str) -> bool:
        explicit = self.policy.get(cat)
        if explicit is not None and not explicit.share:
            return False
        if cat in SENSITIVE_DEFAULT:
            return cat in self.consent
        return True

    def syncable(self, cat: str) -> bool:
        explicit = self.policy.get(cat)
        shared = explicit.share if explicit is not None else cat not in SENSITIVE_DEFAULT
        return shared and self.visible(cat)

    def hidden(self) -> list[str]:
        return [m for m, cats in self.marks.items() if not all(map(self.visible, cats))]

    def unsent(self) -> list[str]:
        return [m for m, cats in self.marks.items() if not all(map(self.syncable, cats))]


def changes(summary: str | None, summary_cat: str | None, **fields: Any) -> UpdateChanges:
    return UpdateChanges(
        assistant_text="네",
        route_family="CHAT",
        workflow_id="",
        last_route=None,
        session_summary=summary,
        active_workflow_id=None,
        sync=None,
        session_summary_category=summary_cat,
        **fields,
    )


class Poster:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def post_json(
        self, path: str, body: dict[str, Any], *, deadline_s: float, max_attempts: int = 5
    ) -> tuple[int, Any]:
        self.bodies.append(body)
        acked = [w["write_id"] for w in body["writes"]]
        return 200, {"sync": {"cursor": "c", "version": "v1"}, "acked": acked}


def fill(memory: Memory, outbox: SyncOutbox, oracle: Oracle, data: dict[str, Any]) -> None:
    pairs: list[tuple[str, str]] = []  # (pair_id, marker)
    of_session: dict[str, tuple[list[str], list[str]]] = {s: ([], []) for s in SESSIONS}
    with memory.db.atomic():
        for n, spec in enumerate(data["turns"]):
            marker, text = oracle.text(spec["term"], spec["pair_cat"])
            pair_id, session = memory.record_utterance(
                turn_id=f"t{n}", requested_session=spec["session"], text=text
            )
            cands: tuple[CandidateIn, ...] = ()
            if spec["candidate"]:
                c_marker, value = oracle.text(*spec["candidate"])
                cands = (CandidateIn(f"k{n}", value, spec["candidate"][1]),)
                oracle.marks[marker] |= oracle.marks[c_marker]  # the pair sourced it
            summary, s_cat = None, None
            if spec["summary"]:
                s_marker, summary = oracle.text(*spec["summary"])
                s_cat = spec["summary"][1]
                of_session[session][1].append(s_marker)
            of_session[session][0].append(marker)
            upd = changes(summary, s_cat, pair_category=spec["pair_cat"], profile_candidates=cands)
            outbox.enqueue(memory.apply_turn(pair_id, session, upd))
            pairs.append((pair_id, marker))
        for term_, cat, source_idx in data["items"]:  # cloud items relabel their source pairs
            marker, value = oracle.text(term_, cat)
            cited = [pairs[i] for i in source_idx if i < len(pairs)]
            for _, pair_marker in cited:
                oracle.marks[pair_marker] |= oracle.marks[marker]
            item = {"key": marker, "value": value, "category": cat}
            memory.tiers.apply_updates(
                {"profile_items": [item | {"source_pair_ids": [p for p, _ in cited]}]}
            )
        # a session summary derives from every pair of its session
        for pair_marks, summary_marks in of_session.values():
            cats = {c for m in pair_marks for c in oracle.marks[m]}
            for m in summary_marks:
                oracle.marks[m] |= cats
        for day, (term_, cat, sources) in enumerate(data["dailies"]):
            marker, text = oracle.text(term_, cat)
            memory.tiers.put_daily(
                f"2026-06-{day + 10}", text, source_session_ids=sources, category=cat
            )
            for source in sources:
                for m in of_session[source][0] + of_session[source][1]:
                    oracle.marks[marker] |= oracle.marks[m]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.fixed_dictionaries({c: entry for c in CATEGORIES}),
    consent=st.frozensets(st.sampled_from(CATEGORIES)),
    data=st.fixed_dictionaries(
        {
            "turns": st.lists(turn_s, max_size=8),
            "items": st.lists(item_s, max_size=3),
            "dailies": st.lists(daily_s, max_size=3),
        }
    ),
)
def test_no_blocked_text_in_a_snapshot_or_a_sync_body(
    policy: dict[str, CategoryPolicy | None], consent: frozenset[str], data: dict[str, Any]
) -> None:
    privacy = PrivacyPolicy(
        categories={c: p for c, p in policy.items() if p is not None}, consented=consent
    )
    oracle = Oracle(policy, consent)
    with tempfile.TemporaryDirectory() as tmp:
        db = open_state_db(Path(tmp) / "state.db", MIGRATIONS, synchronous="NORMAL")
        try:
            clock = ManualClock()
            memory = Memory(db=db, clock=clock, policy=MemoryPolicy(privacy=privacy))
            outbox = SyncOutbox(db=db, clock=clock)
            fill(memory, outbox, oracle, data)
            snapshots = [canonical(memory.snapshot(s)).decode() for s in [*SESSIONS, None]]
            # relevance never brings a hidden text in: utterances that name each one exactly
            said = [f"{m} {' '.join(TERMS.values())} 거실" for m in oracle.hidden()[:4]]
            for text in [*said, "안녕", ""]:
                snapshots += [
                    canonical(memory.snapshot(s, text, {"current_room": "현관"})).decode()
                    for s in [*SESSIONS, None]
                ]
            for marker in oracle.hidden():
                assert not any(marker in s for s in snapshots), (marker, oracle.marks[marker])
            poster = Poster()
            replayer = Replayer(
                db=db,
                clock=clock,
                outbox=outbox,
                poster=poster,
                sink=MemorySyncSink(memory),
                device_id="robot-001",
                batch_size=5,
            )
            asyncio.run(replayer.drain(attempts=2))
            sent = canonical(poster.bodies).decode()
            for marker in oracle.unsent():
                assert marker not in sent, (marker, oracle.marks[marker])
            assert outbox.pending() == 0
        finally:
            db.close()
