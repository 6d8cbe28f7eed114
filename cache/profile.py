"""Profile items and their evidence: the shell around `promotion.next_status`.

Items are unique by (key, canonical JSON value). Confirming one value of a key demotes any other
confirmed value of that key back to `candidate` (its evidence is kept), so a key has at most one
confirmed value. Methods run inside the caller's transaction and return the sync writes owed.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.db import Database
from a2a_common.ids import new_id
from a2a_common.people import HOUSEHOLD
from a2a_common.text import normal, normal_value
from a2a_common.writes import SyncWrite
from cache.labels import Labels, merge, value_texts
from cache.model import CandidateIn, Evidence, ItemStatus, PromotionPolicy
from cache.privacy import PrivacyPolicy, category_name
from cache.promotion import next_status, replay_status
from cache.revision import counted, evidence_days, recontest, supersede, window_start

_ITEM_COLUMNS = (
    "item_id, key, value, category, confidence, relevance_score, status, expire_at, sensitive,"
    " source_candidate_ids, source_summary_ids, source_session_ids, source_pair_ids, origin,"
    " confirmed_at, contested_by, superseded_by, superseded_at, supersedes, person_id"
)


def value_key(value: Any) -> str:
    """The canonical text a value is stored and compared as (its strings as SPEC §2.4 takes
    them: NFC, no format characters)."""
    return jsonx.canonical(normal_value(value)).decode("utf-8")


def normal_candidate(cand: CandidateIn) -> CandidateIn:
    """A candidate whose key and value are taken as SPEC §2.4 says, whatever its source (the
    cloud's models do it at the door; the device's own observations come from task args)."""
    key, value = normal(cand.key), normal_value(cand.value)
    if key == cand.key and value == cand.value:
        return cand
    return replace(cand, key=key, value=value)


# the provenance a `profile_candidate` write carries only as far as its change added it
_CHANGE_IDS = ("source_candidate_ids", "source_pair_ids", "source_session_ids")


def item_json(row: dict[str, Any]) -> dict[str, Any]:
    """An item as the sync payload carries it (value decoded, id lists as lists)."""
    out = dict(row)
    out["value"] = json.loads(row["value"])
    for name in (
        "source_candidate_ids",
        "source_summary_ids",
        "source_session_ids",
        "source_pair_ids",
    ):
        out[name] = json.loads(row[name])
    out["sensitive"] = bool(row["sensitive"])
    return out


def fresh_since(item: dict[str, Any]) -> str | None:
    """A superseded value counts only evidence that arrived after it was superseded."""
    return item["superseded_at"] if item.get("superseded_by") else None


class ProfileStore:
    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        timezone: str,
        policy: PromotionPolicy,
        privacy: PrivacyPolicy,
        labels: Labels | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._zone = ZoneInfo(timezone)
        self._policy = policy
        self._privacy = privacy
        self._labels = labels or Labels(db=db, privacy=privacy)

    def set_privacy(self, privacy: PrivacyPolicy) -> None:
        self._privacy = privacy

    def category_of(self, key: str, value: Any, category: str | None) -> str | None:
        """The cloud's category, else the lexicon's over the key and the value's text (an
        item's own words; its source pairs' categories do not make `preferred_room` health)."""
        if category_name(category):
            return category_name(category)
        found = self._privacy.categorize(key, *value_texts(value))
        return found[0] if found else None

    def categories_of(self, cand: CandidateIn) -> list[str]:
        """Every category a candidate carries: its own, the lexicon's over key and value."""
        return merge([cand.category], self._privacy.categorize(cand.key, *value_texts(cand.value)))

    def classified(self, cand: CandidateIn) -> CandidateIn:
        category = self.category_of(cand.key, cand.value, cand.category)
        return cand if category == cand.category else replace(cand, category=category)

    def local_day(self, when: datetime) -> str:
        return when.astimezone(self._zone).date().isoformat()

    def first_day(self, now: datetime) -> str:
        """The first local day of the evidence window (SPEC §5.4)."""
        return window_start(self.local_day(now), self._policy)

    def item(self, key: str, value: Any, person: str = HOUSEHOLD) -> dict[str, Any] | None:
        """The person's item of this key and value (items are one person's, SPEC §5.7)."""
        cursor = self._db.execute(
            f"SELECT {_ITEM_COLUMNS} FROM profile_items WHERE key = ? AND value = ?"
            " AND person_id = ?",
            [normal(key), value_key(value), person],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cursor.description], row, strict=True))

    def keys_reading(self, key: str) -> list[str]:
        """The stored keys that read as `key` (SPEC §2.4): the key itself, and any variant a
        cache written before the door normalised holds (composed differently, a zero-width
        space inside); sorted."""
        wanted = normal(key)
        rows = self._db.execute("SELECT DISTINCT key FROM profile_items").fetchall()
        return sorted(k for (k,) in rows if k == wanted or normal(k) == wanted)

    def items(self, key: str | None = None, person: str | None = None) -> list[dict[str, Any]]:
        sql = f"SELECT {_ITEM_COLUMNS} FROM profile_items WHERE 1"
        params: list[Any] = []
        if key is not None:
            sql += " AND key = ?"
            params.append(key)
        if person is not None:
            sql += " AND person_id = ?"
            params.append(person)
        cursor = self._db.execute(sql + " ORDER BY key, item_id", params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def window_counts(self, item: dict[str, Any]) -> tuple[int, int]:
        """(evidence rows, distinct local days) of an item as promotion counts them now: inside
        the window, and for a superseded value only what arrived after (SPEC §5.4)."""
        first = self.first_day(self._clock.now())
        return counted(self._db, item["item_id"], first, fresh_since(item))

    def evidence(self, item_id: str) -> list[Evidence]:
        rows = self._db.execute(
            "SELECT candidate_id, pair_id, session_id, day, kind, created_at FROM profile_evidence"
            " WHERE item_id = ? ORDER BY created_at, candidate_id",
            [item_id],
        ).fetchall()
        return [Evidence(*row) for row in rows]

    def _ensure_item(self, cand: CandidateIn, now: datetime, person: str) -> dict[str, Any]:
        found = self.item(cand.key, cand.value, person)
        if found is not None:
            return found
        self._db.execute(
            "INSERT INTO profile_items (item_id, key, value, category, confidence,"
            " relevance_score, sensitive, created_at, updated_at, person_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                new_id("profile", self._clock),
                cand.key,
                value_key(cand.value),
                category_name(cand.category),
                cand.confidence,
                cand.confidence if cand.confidence is not None else 0.5,
                int(self._privacy.is_sensitive(cand.category)),
                iso(now),
                iso(now),
                person,
            ],
        )
        created = self.item(cand.key, cand.value, person)
        assert created is not None
        self.label_item(created["item_id"], cand.key, cand.value, cand.category)
        return created

    def label_item(self, item_id: str, key: str, value: Any, category: str | None) -> list[str]:
        """The item's categories: its own, then the lexicon's over key and value (a health
        word in a value the cloud called `contact` still makes it health); they only grow."""
        row = self._db.execute(
            "SELECT categories, sensitive FROM profile_items WHERE item_id = ?", [item_id]
        ).fetchone()
        found = self._privacy.categorize(key, *value_texts(value))
        cats = merge(json.loads(row[0]) if row else [], [category], found)
        text, flag = jsonx.dumps(cats), int(self._privacy.any_sensitive(cats))
        if row is not None and row[0] == text and row[1] >= flag:
            return cats  # already so: no write
        self._db.execute(
            "UPDATE profile_items SET categories = ?, sensitive = max(sensitive, ?)"
            " WHERE item_id = ?",
            [text, flag, item_id],
        )
        return cats

    def add_evidence(
        self,
        cand: CandidateIn,
        *,
        pair_id: str,
        session_id: str,
        source: str,
        person: str = HOUSEHOLD,
    ) -> list[SyncWrite]:
        """Count one turn's evidence for `person`'s item (per person: two people's single
        mentions are never one person's two, SPEC §5.7); promote; return the sync writes the
        change owes. The cost does not grow with the item's evidence: counts come from the
        index, the provenance lists get the new ids appended (evidence only ever arrives newest
        last)."""
        cand = normal_candidate(cand)
        if self._privacy.never_stored(self.categories_of(cand)):
            return []  # `store: never`: not written at all
        now = self._clock.now()
        item = self._ensure_item(cand, now, person)
        added = self._record(item["item_id"], cand, pair_id, session_id, source, now, person)
        if added is None:
            return []
        first, since = self.first_day(now), fresh_since(item)
        status: ItemStatus = item["status"]
        if status not in ("confirmed", "revoked"):  # those evidence does not move
            upto = (
                self._policy.min_mentions,
                max(self._policy.min_days, self._policy.auto_confirm_days),
            )
            after = counted(self._db, item["item_id"], first, since, upto=upto)
            before = counted(self._db, item["item_id"], first, since, pair_id, upto)
            status = next_status(status, before, after, cand.evidence_kind, self._policy)
        confidence = max(
            (c for c in (item["confidence"], cand.confidence) if c is not None), default=None
        )
        candidates = json.loads(item["source_candidate_ids"])
        pairs = json.loads(item["source_pair_ids"])
        sessions = json.loads(item["source_session_ids"])
        if added:  # a new evidence row, not an upgraded one
            candidates.append(added)
            pairs.append(pair_id)
            if session_id not in sessions:
                bisect.insort(sessions, session_id)
        return self._settle(
            item,
            (candidates, pairs, sessions),
            status,
            now,
            confidence,
            cand.category,
            added=(added, pair_id, session_id) if added else None,
        )

    def recount(self, item_id: str) -> list[SyncWrite]:
        """After some of an item's evidence was forgotten: its sources and status again."""
        row = self._db.execute(
            "SELECT key, value, person_id FROM profile_items WHERE item_id = ?", [item_id]
        ).fetchone()
        if row is None:
            return []
        item = self.item(row[0], json.loads(row[1]), row[2])
        assert item is not None
        evidence = self.evidence(item_id)
        status: ItemStatus = item["status"]
        if status != "revoked" and item["origin"] == "device":
            since = fresh_since(item) or ""
            status = replay_status([e for e in evidence if e.created_at > since], self._policy)
        sources = (
            [e.candidate_id for e in evidence],
            [e.pair_id for e in evidence],
            sorted({e.session_id for e in evidence}),
        )
        return self._settle(item, sources, status, self._clock.now(), item["confidence"])

    def _settle(
        self,
        item: dict[str, Any],
        sources: tuple[list[str], list[str], list[str]],
        status: ItemStatus,
        now: datetime,
        confidence: float | None,
        category: str | None = None,
        added: tuple[str, str, str] | None = None,
    ) -> list[SyncWrite]:
        """Write the item's status, confidence, category (when it had none) and provenance
        (candidate, pair and session ids) in one UPDATE: the row holds the id lists.

        The `profile_candidate` write carries the item with the provenance this change `added`
        (the new evidence's candidate, pair and session id; none for a recount or an upgraded
        mention), not the whole chain: that grows by an id pair with every mention, and an item
        the device observes each day (preferred_room) reached thousands, a sync write of
        hundreds of KB per turn. `mentions` and `days` still say the totals; the whole chain
        goes with `profile_confirmed` (SPEC 5.4)."""
        candidates, pairs, sessions = sources
        category = item["category"] if item["category"] is not None else category_name(category)
        expire = self._privacy.expire_at(category, now)
        self._db.execute(
            "UPDATE profile_items SET status = ?, confidence = ?, category = ?,"
            " sensitive = max(sensitive, ?), source_candidate_ids = ?, source_pair_ids = ?,"
            " source_session_ids = ?, expire_at = coalesce(?, expire_at), updated_at = ?"
            " WHERE item_id = ?",
            [
                status,
                confidence,
                category,
                int(self._privacy.is_sensitive(category)),
                jsonx.dumps(candidates),
                jsonx.dumps(pairs),
                jsonx.dumps(sessions),
                iso(expire) if expire else None,
                iso(now),
                item["item_id"],
            ],
        )
        value, person = json.loads(item["value"]), item["person_id"]
        cats = self.label_item(item["item_id"], item["key"], value, category)
        updated = self.item(item["key"], value, person)
        assert updated is not None
        newly = status == "confirmed" and item["status"] != "confirmed"
        if newly:
            supersede(self._db, item["key"], item["item_id"], now, person)
            updated = self.item(item["key"], value, person) or updated
        recontest(self._db, item["key"], self.first_day(now), self._policy, person)
        if not all(self._privacy.shared(c) for c in cats):
            return []  # `share: false`: stays on the device
        labelled = item_json(updated) | {"categories": cats}
        change = [[added[0]], [added[1]], [added[2]]] if added else [[], [], []]
        provenance = dict(zip(_CHANGE_IDS, change, strict=True))
        payload = (
            labelled
            | provenance
            | {"mentions": len(candidates), "days": evidence_days(self._db, item["item_id"])}
        )
        writes = [SyncWrite("profile_candidate", payload)]
        if newly:
            writes.append(SyncWrite("profile_confirmed", self._confirmed_payload(labelled)))
        return writes

    def _record(
        self,
        item_id: str,
        cand: CandidateIn,
        pair_id: str,
        session_id: str,
        source: str,
        now: datetime,
        person: str = HOUSEHOLD,
    ) -> str | None:
        """Insert the evidence of this pair (returns its candidate id), or upgrade a mention to
        an acceptance (returns ""); None when there is nothing new."""
        existing = self._db.execute(
            "SELECT kind FROM profile_evidence WHERE item_id = ? AND pair_id = ?",
            [item_id, pair_id],
        ).fetchone()
        if existing is not None:
            if existing[0] == "mention" and cand.evidence_kind == "suggestion_accepted":
                self._db.execute(
                    "UPDATE profile_evidence SET kind = 'suggestion_accepted'"
                    " WHERE item_id = ? AND pair_id = ?",
                    [item_id, pair_id],
                )
                return ""
            return None
        candidate_id = new_id("cand", self._clock)
        self._db.execute(
            "INSERT INTO profile_evidence (candidate_id, item_id, pair_id, session_id, day, kind,"
            " source, created_at, person_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                candidate_id,
                item_id,
                pair_id,
                session_id,
                self.local_day(now),
                cand.evidence_kind,
                source,
                iso(now),
                person,
            ],
        )
        return candidate_id

    def _confirmed_payload(self, labelled: dict[str, Any]) -> dict[str, Any]:
        """The `profile_confirmed` write: the item, and the value it supersedes (its id, key
        and value) so the cloud updates its fact instead of holding two."""
        old = labelled.get("supersedes")
        row = self._db.execute(
            "SELECT key, value FROM profile_items WHERE item_id = ?", [old]
        ).fetchone()
        if row is None:
            return labelled
        return labelled | {
            "supersedes": {"item_id": old, "key": row[0], "value": json.loads(row[1])}
        }

    def put_confirmed(self, fields: dict[str, Any]) -> None:
        """Take a cloud-confirmed item (sync `updates.profile_items`): it replaces the item of the
        same key (of the person it names; none: the household's); provenance lists given by the
        cloud are kept as given."""
        fields = fields | {"key": normal(fields["key"]), "value": normal_value(fields["value"])}
        person = fields.get("person_id") or HOUSEHOLD
        category = self.category_of(fields["key"], fields["value"], fields.get("category"))
        cand = CandidateIn(fields["key"], fields["value"], category, fields.get("confidence"))
        known = self._privacy.known()
        for pair_id in fields.get("source_pair_ids") or []:  # retroactively, its sources
            sourced = [c for c in self.categories_of(cand) if c in known]
            self._labels.label_pair(pair_id, sourced, texts=False)
        if self._privacy.never_stored(self.categories_of(cand)):
            return  # `store: never` holds for what the cloud sends too
        now = self._clock.now()
        item = self._ensure_item(cand, now, person)
        status: ItemStatus = "confirmed"
        relevance = fields.get("relevance_score")
        cap = self._privacy.expire_at(category, now)  # the 30-day cap holds for the cloud's too
        ends = [e for e in (fields.get("expire_at"), iso(cap) if cap else None) if e]

        self._db.execute(
            "UPDATE profile_items SET status = ?, category = ?, sensitive = ?, confidence = ?,"
            " relevance_score = coalesce(?, relevance_score), expire_at = ?, origin = 'cloud',"
            " source_candidate_ids = ?, source_summary_ids = ?, source_session_ids = ?,"
            " source_pair_ids = ?, updated_at = ? WHERE item_id = ?",
            [
                status,
                category,
                int(self._privacy.is_sensitive(category)),
                fields.get("confidence"),
                relevance,
                min(ends) if ends else None,
                jsonx.dumps(fields.get("source_candidate_ids") or []),
                jsonx.dumps(fields.get("source_summary_ids") or []),
                jsonx.dumps(fields.get("source_session_ids") or []),
                jsonx.dumps(fields.get("source_pair_ids") or []),
                iso(now),
                item["item_id"],
            ],
        )
        self.label_item(item["item_id"], cand.key, cand.value, category)
        supersede(self._db, cand.key, item["item_id"], now, person)  # a cloud item replacing one

    def delete_key(self, key: str, person: str = HOUSEHOLD) -> int:
        """Remove every item of `key` of `person` (a cloud `deleted_profile_keys` entry), variants
        of the key made before included (`keys_reading`)."""
        removed = 0
        for stored in self.keys_reading(key):
            found = self._db.execute(
                "DELETE FROM profile_items WHERE key = ? AND person_id = ?", [stored, person]
            )
            removed += int(found.rowcount)
        return removed
