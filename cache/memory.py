"""The memory cache as the runtime uses it: one facade over pairs, sessions, tiers, profile
items and the snapshot view. Write methods run inside the caller's transaction and return the
sync writes they owe, for the caller to queue in that same transaction."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from a2a_common.clock import Clock, iso, parse_iso
from a2a_common.db import Database
from a2a_common.ids import new_id
from a2a_common.people import HOUSEHOLD
from a2a_common.text import normal
from a2a_common.writes import SyncWrite
from cache import owed
from cache.focus import FOCUS_DAILY, focused
from cache.forget import Forgetter
from cache.labels import Labels
from cache.lasting import LastingCache
from cache.model import CacheView, CandidateIn, PromotionPolicy, SessionRow, SyncPosition
from cache.privacy import PrivacyPolicy
from cache.profile import ProfileStore
from cache.relevance import query, turn_key
from cache.retention import Sweeper
from cache.sessions import choose_session
from cache.snapshot import MAX_DAILY, Snapshot, build_snapshot
from cache.store import CacheStore
from cache.tiers import TierStore
from cache.update import UpdateChanges, sync_refusal, sync_to_adopt
from cache.view import read_view

log = logging.getLogger(__name__)
SYNC_REFUSED = "sync_refused"  # device_state: the last offered sync position refused, and why


def _no_grants(_person: str) -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True)
class MemoryPolicy:
    snapshot_budget_bytes: int = 4096
    recent_pairs: int = 6
    standing_items: int = 2  # unmatched profile items a turn may still carry (SPEC §5.2)
    session_idle_s: int = 1800
    timezone: str = "Asia/Seoul"
    promotion: PromotionPolicy = field(default_factory=PromotionPolicy)
    retention_days: int = 30
    privacy: PrivacyPolicy = field(default_factory=PrivacyPolicy)


class Memory:
    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        policy: MemoryPolicy,
        consents: Callable[[str], frozenset[str]] | None = None,
    ) -> None:
        self.db = db
        # the categories a consent grant of a person (or the household) covers now (the
        # device's register, SPEC 5.6, 5.7), read at each snapshot beside the config's
        self._consents = consents or _no_grants
        self._clock = clock
        self.policy = policy
        self.store = CacheStore(db=db)
        self.labels = Labels(db=db, privacy=policy.privacy)
        self.profile = ProfileStore(
            db=db,
            clock=clock,
            timezone=policy.timezone,
            policy=policy.promotion,
            privacy=policy.privacy,
            labels=self.labels,
        )
        self.tiers = TierStore(db=db, clock=clock, profile=self.profile, labels=self.labels)
        self.forgetter = Forgetter(db=db, clock=clock, profile=self.profile)
        self.sweeper = Sweeper(db=db, retention_days=policy.retention_days, privacy=policy.privacy)
        # what a snapshot reads that only writes and expiry change (cache/lasting.py)
        self.lasting = LastingCache(db)

    def set_privacy(self, privacy: PrivacyPolicy) -> None:
        """A new policy (SIGHUP); it applies to what is written and read from now on."""
        self.policy = replace(self.policy, privacy=privacy)
        self.labels.privacy = privacy
        self.profile.set_privacy(privacy)
        self.sweeper.set_privacy(privacy)
        self.lasting.clear()  # its key holds the policy's blocked categories; cleared anyway

    def consented(self, person: str = HOUSEHOLD) -> frozenset[str]:
        """The categories consent is held for, for `person`'s texts: the one seam every read
        of consent goes through (the snapshot's filter and the sync writes' screen). The
        config's standing consent is the household's (docs/design.md, *People*): a person's
        sensitive text goes out only under that person's own grant."""
        held = self._consents(person)
        return self.policy.privacy.consented | held if person == HOUSEHOLD else held

    # --- sessions and the turn's pair ---------------------------------------------------------
    def session_for(self, requested: str | None, now: datetime, person: str = HOUSEHOLD) -> str:
        return self._session_after(self.store.latest_session(person), requested, now, person)

    def _session_after(
        self,
        latest: SessionRow | None,
        requested: str | None,
        now: datetime,
        person: str = HOUSEHOLD,
    ) -> str:
        """Sessions are per person (SPEC §5.7): a requested session that is another person's
        is not joined; the person's own current one (or a new one) is taken instead."""
        if requested and self.store.session_person(requested) not in (None, person):
            log.warning("turn names a session of another person: a session of its own is used")
            requested = None
        return choose_session(
            requested, latest, now, self.policy.session_idle_s, new_id("session", self._clock)
        )

    def current_sessions(self, now: datetime) -> list[str]:
        """Each person's session that is still going at `now` (within `session_idle_s`)."""
        idle = self.policy.session_idle_s
        return [
            s.session_id
            for s in self.store.latest_sessions()
            if (now - parse_iso(s.last_turn_at)).total_seconds() < idle
        ]

    def record_utterance(
        self,
        *,
        turn_id: str,
        requested_session: str | None,
        text: str,
        person: str = HOUSEHOLD,
    ) -> tuple[str, str]:
        """Open or continue the person's session and record the user's words as theirs;
        (pair_id, session_id). The words are kept as SPEC §2.4 takes them (the door did so
        already; idempotent)."""
        text = normal(text)
        now = self._clock.now()
        # read once: the same row picks the session and tells whether the last one just ended
        latest = self.store.latest_session(person)
        session_id = self._session_after(latest, requested_session, now, person)
        if latest is not None and latest.session_id != session_id:
            # `store: session` items go with their session; the others' sessions go on
            going = [s for s in self.current_sessions(now) if s != latest.session_id]
            self.sweeper.end_sessions([session_id, *going])
        if latest is None or latest.session_id != session_id:
            self.store.enter_session(session_id, now, person)
        pair_id = new_id("pair", self._clock)
        self.store.record_utterance(
            pair_id=pair_id,
            turn_id=turn_id,
            session_id=session_id,
            text=text,
            now=now,
            person=person,
        )
        self.labels.label_pair(pair_id)
        return pair_id, session_id

    def apply_turn(self, pair_id: str, session_id: str, changes: UpdateChanges) -> list[SyncWrite]:
        """The planner's update of a turn. Nothing when the user had the utterance forgotten
        while the planner answered: what it said is not recorded, nor learnt from."""
        if not self.store.has_pair(pair_id):
            owed.answered(self.db, pair_id)  # its turn is answered all the same
            return []
        self.store.apply_changes(pair_id, session_id, changes, self._clock.now())
        if changes.sync_refused:
            self.note_sync_refusal(changes.sync_refused)
        candidates = [self.profile.classified(c) for c in changes.profile_candidates]
        known = self.policy.privacy.known()
        sourced = [c for cand in candidates for c in self.profile.categories_of(cand)]
        self.labels.label_pair(pair_id, [changes.pair_category], [c for c in sourced if c in known])
        if changes.session_summary is not None:
            self.labels.session_summary(
                session_id, changes.session_summary, changes.session_summary_category
            )
        writes = self.pair_writes(pair_id)
        person = self.store.person_of_pair(pair_id)  # the planner's candidates are its speaker's
        for cand in candidates:
            writes += self.profile.add_evidence(
                cand, pair_id=pair_id, session_id=session_id, source="cloud", person=person
            )
        return writes

    def pair_writes(self, pair_id: str) -> list[SyncWrite]:
        """The pair's `short_term_pair` write, unless its categories keep it on the device."""
        person = self.store.person_of_pair(pair_id)
        if self.policy.privacy.withheld(self.labels.of_pair(pair_id), self.consented(person)):
            return []
        return [self.store.pair_write(pair_id)]

    def close_unanswered(self, pair_id: str, status: str) -> list[SyncWrite]:
        if not self.store.has_pair(pair_id):  # forgotten meanwhile; its turn is answered
            owed.answered(self.db, pair_id)
            return []
        self.store.close_pair(pair_id, status=status, now=self._clock.now())
        return self.pair_writes(pair_id)

    def observe(
        self, candidates: list[CandidateIn], *, pair_id: str, session_id: str
    ) -> list[SyncWrite]:
        """The device's own evidence (e.g. a completed move → purify), tied to its turn's pair;
        none when that pair was forgotten. What the device observes is the household's (SPEC
        §5.7), whoever asked for the workflow."""
        writes: list[SyncWrite] = []
        if candidates and not self.store.has_pair(pair_id):
            return writes
        for cand in candidates:
            writes += self.profile.add_evidence(
                self.profile.classified(cand),
                pair_id=pair_id,
                session_id=session_id,
                source="device",
                person=HOUSEHOLD,
            )
        return writes

    # --- the snapshot -------------------------------------------------------------------------
    def view(
        self, session_id: str | None, *, max_daily: int = MAX_DAILY, person: str = HOUSEHOLD
    ) -> CacheView:
        """What `person`'s turn may see: their tiers and the household's (SPEC §5.7)."""
        return read_view(
            self.db,
            session_id=session_id,
            now=self._clock.now(),
            recent_pairs=self.policy.recent_pairs,
            consented=self.consented(person),
            privacy=self.policy.privacy,
            max_daily=max_daily,
            lasting=self.lasting,
            person=person,
            household_consented=None if person == HOUSEHOLD else self.consented(HOUSEHOLD),
        )

    def snapshot(
        self,
        session_id: str | None,
        utterance: str | None = None,
        device_context: Mapping[str, Any] | None = None,
        person: str = HOUSEHOLD,
    ) -> Snapshot:
        """The snapshot of SPEC §5.2 for `person`'s turn (SPEC §5.7: their tiers and the
        household's, never another person's). With the turn's `utterance` (and device context)
        it is focused on what the utterance names; without one (the CLI's preview, the seed's
        golden vector) every confirmed item ranks by relevance alone."""
        if utterance is None:
            view = self.view(session_id, person=person)
        else:
            view = focused(
                self.view(session_id, max_daily=FOCUS_DAILY, person=person),
                query(utterance, device_context),
                standing=self.policy.standing_items,
                turn=turn_key(self.store.turn_ordinal(), int(self._clock.now().timestamp() // 60)),
            )
        return build_snapshot(view, self.policy.snapshot_budget_bytes, self.policy.recent_pairs)

    def snapshot_for(
        self,
        utterance: str,
        device_context: Mapping[str, Any] | None = None,
        person: str = HOUSEHOLD,
    ) -> Snapshot:
        """The snapshot a turn of `person` with this utterance would send now, in their current
        session (the console's typed turns and `memory snapshot --for`)."""
        session = self.session_for(None, self._clock.now(), person)
        return self.snapshot(session, utterance, device_context, person)

    def now(self) -> datetime:
        return self._clock.now()

    def sync_position(self) -> SyncPosition:
        return self.store.sync_position()

    def adopt_sync(self, offered: SyncPosition, *, force: bool = False) -> bool:
        """A sync answer's position: adopted unless it moves backwards (`force`: a 409's may)
        or is refused (`sync_refusal`: logged, kept for `a2a-edge sync status`)."""
        current = self.store.sync_position()
        refusal = sync_refusal(current, offered, force=force)
        if refusal is not None:
            self.note_sync_refusal(refusal)
            return False
        if force or sync_to_adopt(current, offered) is not None:
            self.store.set_sync(offered)
            return True
        return False

    def note_sync_refusal(self, reason: str) -> None:
        log.warning("sync position refused: %s", reason)
        self.store.set_state(SYNC_REFUSED, {"at": iso(self._clock.now()), "reason": reason})

    def state(self, key: str, default: Any = None) -> Any:
        return self.store.state(key, default)
