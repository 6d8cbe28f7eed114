"""Mid-term tiers (daily summaries, weekly digests) and the cloud's sync `updates` (SPEC §3.2).

A daily summary replaces the one of the same `day`, a digest the one of the same `week`, a
profile item the confirmed item of the same `key`; a deleted key removes that key's items.
Each entry is its sources' person's (`cache.owner`): one that names another person than its
sources', or has sources of two people, is refused with a WARNING (ids only) and counted.
Summaries and digests get their categories (the cloud's, their sources', the lexicon's) and the
expiry those ask for, capped: the earlier of the cloud's `expire_at` and the policy's. A text in
a `store: never` category is not written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD
from cache.labels import Labels
from cache.owner import owner
from cache.privacy import PrivacyPolicy
from cache.profile import ProfileStore


def _own_id(kind: str, period: str, person: str) -> str:
    """A summary's id when the cloud gives none: the household's as before, a person's
    with the person in it (ids are unique across people)."""
    return f"{kind}-{period}" if person == HOUSEHOLD else f"{kind}-{person}-{period}"


log = logging.getLogger(__name__)


def _person(entry: Mapping[str, Any], updates: Mapping[str, Any]) -> str:
    """Whose a deleted key is: the answer's `person_id`, else the household's."""
    return str(entry.get("person_id") or updates.get("person_id") or HOUSEHOLD)


def _earliest(*stamps: str | None) -> str | None:
    present = [s for s in stamps if s]
    return min(present) if present else None


class TierStore:
    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        profile: ProfileStore,
        labels: Labels | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._profile = profile
        self._labels = labels or Labels(db=db, privacy=PrivacyPolicy())

    def put_daily(
        self,
        day: str,
        summary: str,
        *,
        source_session_ids: list[str] | None = None,
        summary_id: str | None = None,
        expire_at: str | None = None,
        category: str | None = None,
        person: str = HOUSEHOLD,
    ) -> bool:
        """False when its categories say `store: never` (nothing written)."""
        sources = source_session_ids or []
        cats, cap = self._labels.derived(
            summary, category, self._labels.of_sessions(sources), self._clock.now()
        )
        if self._labels.privacy.never_stored(cats):
            return False
        self._db.execute(
            "INSERT INTO daily_summaries (summary_id, day, summary, source_session_ids, expire_at,"
            " updated_at, categories, sensitive, person_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (person_id, day) DO UPDATE SET summary = excluded.summary,"
            " source_session_ids = excluded.source_session_ids, expire_at = excluded.expire_at,"
            " updated_at = excluded.updated_at, categories = excluded.categories,"
            " sensitive = excluded.sensitive",
            [
                summary_id or _own_id("daily", day, person),
                day,
                summary,
                jsonx.dumps(sources),
                _earliest(expire_at, cap),
                iso(self._clock.now()),
                jsonx.dumps(cats),
                int(self._labels.privacy.any_sensitive(cats)),
                person,
            ],
        )
        return True

    def put_weekly(
        self,
        week: str,
        digest: str,
        *,
        source_summary_ids: list[str] | None = None,
        digest_id: str | None = None,
        expire_at: str | None = None,
        category: str | None = None,
        person: str = HOUSEHOLD,
    ) -> bool:
        """False when its categories say `store: never` (nothing written)."""
        sources = source_summary_ids or []
        cats, cap = self._labels.derived(
            digest, category, self._labels.of_dailies(sources), self._clock.now()
        )
        if self._labels.privacy.never_stored(cats):
            return False
        self._db.execute(
            "INSERT INTO weekly_digests (digest_id, week, digest, source_summary_ids, expire_at,"
            " updated_at, categories, sensitive, person_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (person_id, week) DO UPDATE SET digest = excluded.digest,"
            " source_summary_ids = excluded.source_summary_ids, expire_at = excluded.expire_at,"
            " updated_at = excluded.updated_at, categories = excluded.categories,"
            " sensitive = excluded.sensitive",
            [
                digest_id or _own_id("weekly", week, person),
                week,
                digest,
                jsonx.dumps(sources),
                _earliest(expire_at, cap),
                iso(self._clock.now()),
                jsonx.dumps(cats),
                int(self._labels.privacy.any_sensitive(cats)),
                person,
            ],
        )
        return True

    def _whose(
        self, where: str, entry: Mapping[str, Any], updates: Mapping[str, Any]
    ) -> str | None:
        """The entry's person, or None when it is refused (said, ids only)."""
        found = owner(self._db, entry, updates)
        if found.person is None:
            log.warning("sync update refused: %s: %s", where, found.reason)
        return found.person

    def apply_updates(self, updates: Mapping[str, Any]) -> dict[str, int]:
        """Apply validated cloud `updates` (inside the caller's transaction); counts per tier,
        and how many entries were refused (whose they are contradicts their sources)."""
        counts = {
            "daily_summaries": 0,
            "weekly_digest": 0,
            "profile_items": 0,
            "deleted": 0,
            "refused": 0,
        }
        for n, daily in enumerate(updates.get("daily_summaries") or []):
            person = self._whose(f"daily_summaries[{n}]", daily, updates)
            if person is None:
                counts["refused"] += 1
                continue
            counts["daily_summaries"] += self.put_daily(
                daily["day"],
                daily["summary"],
                source_session_ids=daily.get("source_session_ids"),
                summary_id=daily.get("summary_id"),
                expire_at=daily.get("expire_at"),
                category=daily.get("category"),
                person=person,
            )
        weekly = updates.get("weekly_digest")
        person = self._whose("weekly_digest", weekly, updates) if weekly else None
        if weekly and person is None:
            counts["refused"] += 1
        elif weekly and person is not None:
            counts["weekly_digest"] = self.put_weekly(
                weekly["week"],
                weekly["digest"],
                source_summary_ids=weekly.get("source_summary_ids"),
                digest_id=weekly.get("digest_id"),
                expire_at=weekly.get("expire_at"),
                category=weekly.get("category"),
                person=person,
            )
        for n, item in enumerate(updates.get("profile_items") or []):
            person = self._whose(f"profile_items[{n}]", item, updates)
            if person is None:
                counts["refused"] += 1
                continue
            self._profile.put_confirmed(item | {"person_id": person})
            counts["profile_items"] += 1
        for key in updates.get("deleted_profile_keys") or []:
            counts["deleted"] += self._profile.delete_key(key, _person({}, updates))
        return counts
