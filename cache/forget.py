"""Forgetting along provenance (SPEC §5.5) and reverting a wrong profile item.

A forget deletes its target and follows the source chains: evidence from forgotten pairs goes,
profile items are recounted (one left without any source goes too; a confirmed one that falls
below its promotion rule steps back), summaries lose the forgotten sessions (and go when none is
left), a digest loses the deleted summaries likewise. Every write happens in the caller's
transaction; the audit keeps ids and counts, never text.

Forgetting a profile key forgets its source pairs too — the fact lives in them: every pair of
the key's evidence and of its items' `source_pair_ids` — unless `with_sources` is false. Then
"derived only from them", with the provenance that exists:
- a session summary has no per-pair provenance and may quote any of its pairs: it is emptied
  when any pair of its session is forgotten;
- a daily summary cites sessions: it goes when it cited a session of a forgotten pair and none
  of its sessions holds a pair any more (it was made of forgotten words only); one that still
  has a live source keeps its text;
- a weekly digest cites daily summaries: it goes when all of them went;
- profile items derived from the forgotten pairs are recounted, and go when no source is left.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.db import Database
from a2a_common.text import normal
from a2a_common.writes import SyncWrite
from cache import owed
from cache.profile import ProfileStore


@dataclass
class Forgotten:
    scope: str
    target: str | None
    pairs: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    summaries: int = 0
    summary_ids: list[str] = field(default_factory=list)
    with_sources: bool = True
    writes: list[SyncWrite] = field(default_factory=list)  # refreshed items still shared

    def tombstone(self) -> SyncWrite:
        """One `memory_deletion` for the cloud: ids only."""
        return SyncWrite(
            "memory_deletion",
            {
                "scope": self.scope,
                "id": self.target,
                "pair_ids": self.pairs,
                "session_ids": self.sessions,
                "item_ids": self.items,
                "profile_keys": self.keys,
                "summary_ids": self.summary_ids,
                "with_sources": self.with_sources,
            },
        )


def _ids(db: Database, sql: str, params: Iterable[Any] = ()) -> list[str]:
    return [str(row[0]) for row in db.execute(sql, list(params)).fetchall()]


def _marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


class Forgetter:
    def __init__(self, *, db: Database, clock: Clock, profile: ProfileStore) -> None:
        self._db = db
        self._clock = clock
        self._profile = profile

    def audit(
        self, action: str, scope: str, target: str | None, counts: dict[str, int], reason: str
    ) -> None:
        self._db.execute(
            "INSERT INTO memory_audit (ts, action, scope, target, counts, reason)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [iso(self._clock.now()), action, scope, target, jsonx.dumps(counts), reason],
        )

    def forget(self, scope: str, target: str | None, *, with_sources: bool = True) -> Forgotten:
        target = None if target is None else normal(target)  # as SPEC §2.4 takes it
        out = Forgotten(scope, target, with_sources=with_sources)
        db = self._db
        if scope == "pair":
            out.pairs = _ids(db, "SELECT pair_id FROM pairs WHERE pair_id = ?", [target])
        elif scope == "session":
            out.sessions = _ids(
                db, "SELECT session_id FROM sessions WHERE session_id = ?", [target]
            )
            out.pairs = _ids(db, "SELECT pair_id FROM pairs WHERE session_id = ?", [target])
        elif scope == "profile_key":
            out.keys = self._profile.keys_reading(target or "")  # variants made before too
            if with_sources:
                out.pairs = self._source_pairs(out.keys)
        elif scope == "person":  # everything of one person (SPEC §5.7)
            out.pairs = _ids(db, "SELECT pair_id FROM pairs WHERE person_id = ?", [target])
            out.sessions = _ids(db, "SELECT session_id FROM sessions WHERE person_id = ?", [target])
            out.items = _ids(db, "SELECT item_id FROM profile_items WHERE person_id = ?", [target])
            self._forget_person_summaries(out, target or "")
        elif scope == "all":
            out.pairs = _ids(db, "SELECT pair_id FROM pairs")
            out.sessions = _ids(db, "SELECT session_id FROM sessions")
            out.keys = _ids(db, "SELECT DISTINCT key FROM profile_items")
        else:
            raise ValueError(f"unknown scope {scope}")
        self._forget_items(out)
        touched = self._forget_pairs(out)
        self._forget_sessions(out)
        if scope != "all":
            self._forget_emptied_summaries(out, touched)
        return out

    def _forget_person_summaries(self, out: Forgotten, person: str) -> None:
        """The person's daily summaries and digests; digests of others citing them lose them."""
        gone: dict[str, list[str]] = {}
        tables = (("daily_summaries", "summary_id"), ("weekly_digests", "digest_id"))
        for table, id_column in tables:
            gone[table] = _ids(
                self._db, f"SELECT {id_column} FROM {table} WHERE person_id = ?", [person]
            )
            self._db.execute(f"DELETE FROM {table} WHERE person_id = ?", [person])
            out.summary_ids += gone[table]
            out.summaries += len(gone[table])
        if daily := gone["daily_summaries"]:
            more = self._strip_summaries("weekly_digests", "digest_id", "source_summary_ids", daily)
            out.summary_ids += more
            out.summaries += len(more)

    def _source_pairs(self, keys: list[str]) -> list[str]:
        """The live pairs a key's items came from: their evidence and `source_pair_ids`."""
        if not keys:
            return []
        marks = _marks(keys)
        return _ids(
            self._db,
            "SELECT pair_id FROM pairs WHERE pair_id IN (SELECT e.pair_id FROM profile_evidence e"
            f" JOIN profile_items i USING (item_id) WHERE i.key IN ({marks}) UNION SELECT"
            f" j.value FROM profile_items i, json_each(i.source_pair_ids) j WHERE i.key IN"
            f" ({marks})) ORDER BY pair_id",
            [*keys, *keys],
        )

    def _forget_emptied_summaries(self, out: Forgotten, sessions: list[str]) -> None:
        """Daily summaries citing a session of a forgotten pair whose sessions hold no pair any
        more; digests left without any source summary."""
        if not sessions:
            return
        dropped = [
            row_id
            for row_id, _ in self._citing(
                "daily_summaries", "summary_id", "source_session_ids", sessions
            )
            if not self._db.execute(
                "SELECT 1 FROM pairs WHERE session_id IN (SELECT value FROM json_each((SELECT"
                " source_session_ids FROM daily_summaries WHERE summary_id = ?))) LIMIT 1",
                [row_id],
            ).fetchone()
        ]
        if not dropped:
            return
        self._db.execute(
            f"DELETE FROM daily_summaries WHERE summary_id IN ({_marks(dropped)})", dropped
        )
        out.summary_ids += dropped
        gone = self._strip_summaries("weekly_digests", "digest_id", "source_summary_ids", dropped)
        out.summary_ids += gone
        out.summaries += len(dropped) + len(gone)

    def _forget_items(self, out: Forgotten) -> None:
        if out.keys:
            out.items += _ids(
                self._db,
                f"SELECT item_id FROM profile_items WHERE key IN ({_marks(out.keys)})",
                out.keys,
            )
        affected: set[str] = set()
        if out.pairs:
            affected |= set(
                _ids(
                    self._db,
                    f"SELECT DISTINCT item_id FROM profile_evidence WHERE pair_id IN"
                    f" ({_marks(out.pairs)})",
                    out.pairs,
                )
            )
            self._db.execute(
                f"DELETE FROM profile_evidence WHERE pair_id IN ({_marks(out.pairs)})", out.pairs
            )
            affected |= self._strip_sources(out.pairs, "source_pair_ids")
        if out.sessions:
            affected |= self._strip_sources(out.sessions, "source_session_ids")
        for item_id in sorted(affected - set(out.items)):
            if self._orphaned(item_id):
                out.items.append(item_id)
            else:
                out.writes += self._profile.recount(item_id)
        if out.items:
            self._db.execute(
                f"DELETE FROM profile_items WHERE item_id IN ({_marks(out.items)})", out.items
            )

    def _strip_sources(self, gone: list[str], column: str) -> set[str]:
        """Remove forgotten ids from a provenance list; returns the items that changed."""
        changed: set[str] = set()
        for item_id, kept in self._citing("profile_items", "item_id", column, gone):
            self._db.execute(
                f"UPDATE profile_items SET {column} = ? WHERE item_id = ?",
                [jsonx.dumps(kept), item_id],
            )
            changed.add(item_id)
        return changed

    def _orphaned(self, item_id: str) -> bool:
        """No evidence and no source of any kind left."""
        row = self._db.execute(
            "SELECT source_candidate_ids, source_summary_ids, source_session_ids,"
            " source_pair_ids, origin FROM profile_items WHERE item_id = ?",
            [item_id],
        ).fetchone()
        evidence = self._db.execute(
            "SELECT count(*) FROM profile_evidence WHERE item_id = ?", [item_id]
        ).fetchone()[0]
        if row is None or evidence:
            return False
        cloud_sources = [json.loads(row[i]) for i in (1, 2, 3)]
        return row[4] == "device" or not any(cloud_sources)

    def _forget_pairs(self, out: Forgotten) -> list[str]:
        """Delete the pairs; the sessions they were in. A pair whose turn waits for its answer
        goes with its words; the answer stays owed by turn id (cache/owed.py)."""
        if not out.pairs:
            return []
        owed.keep(self._db, out.pairs)
        sessions = _ids(
            self._db,
            f"SELECT DISTINCT session_id FROM pairs WHERE pair_id IN ({_marks(out.pairs)})",
            out.pairs,
        )
        self._db.execute(f"DELETE FROM pairs WHERE pair_id IN ({_marks(out.pairs)})", out.pairs)
        # a session summary may quote what was said: it goes with any of its pairs
        self._db.conn.executemany(
            "UPDATE sessions SET summary = '' WHERE session_id = ?", [(s,) for s in sessions]
        )
        return sessions

    def _forget_sessions(self, out: Forgotten) -> None:
        if not out.sessions:
            return
        self._db.execute(
            f"DELETE FROM sessions WHERE session_id IN ({_marks(out.sessions)})", out.sessions
        )
        dropped = self._strip_summaries(
            "daily_summaries", "summary_id", "source_session_ids", out.sessions
        )
        out.summaries += len(dropped)
        out.summary_ids += dropped
        if dropped:
            gone = self._strip_summaries(
                "weekly_digests", "digest_id", "source_summary_ids", dropped
            )
            out.summaries += len(gone)
            out.summary_ids += gone

    def _strip_summaries(
        self, table: str, id_column: str, column: str, gone: list[str]
    ) -> list[str]:
        deleted = []
        for row_id, kept in self._citing(table, id_column, column, gone):
            if kept:
                self._db.execute(
                    f"UPDATE {table} SET {column} = ? WHERE {id_column} = ?",
                    [jsonx.dumps(kept), row_id],
                )
            else:
                self._db.execute(f"DELETE FROM {table} WHERE {id_column} = ?", [row_id])
                deleted.append(row_id)
        return deleted

    def _citing(
        self, table: str, id_column: str, column: str, gone: list[str]
    ) -> list[tuple[str, list[str]]]:
        """Rows whose JSON id list `column` names any of `gone`: (row id, the ids it keeps)."""
        rows = self._db.execute(
            f"SELECT {id_column}, {column} FROM {table} WHERE EXISTS (SELECT 1 FROM"
            f" json_each({table}.{column}) WHERE value IN ({_marks(gone)}))",
            gone,
        ).fetchall()
        drop = set(gone)
        return [(row_id, [v for v in json.loads(raw) if v not in drop]) for row_id, raw in rows]

    def wipe_rest(self) -> int:
        """`all`: every tier left (summaries without sources too); sync position and audit stay."""
        count = 0
        for table in ("daily_summaries", "weekly_digests"):
            count += int(self._db.execute(f"DELETE FROM {table}").rowcount)
        self._db.execute("DELETE FROM profile_evidence")
        self._db.execute(
            "DELETE FROM device_state WHERE key IN ('last_route', 'active_workflow_id')"
        )
        return count

    def revoke(self, key: str) -> tuple[list[str], SyncWrite | None]:
        """Mark the key's items `revoked`, keeping them for audit without their value text; old
        evidence stays with them, so it can never promote the same value again. The key is
        taken as SPEC §2.4 says and reaches the variants of it a cache made before holds."""
        key = normal(key)
        keys = self._profile.keys_reading(key)
        if not keys:
            return [], None
        items = _ids(
            self._db,
            f"SELECT item_id FROM profile_items WHERE key IN ({_marks(keys)})"
            " AND status != 'revoked' ORDER BY item_id",
            keys,
        )
        for item_id in items:
            self._db.execute(
                "UPDATE profile_items SET status = 'revoked', value = ?, updated_at = ?"
                " WHERE item_id = ?",
                [jsonx.dumps({"revoked": item_id}), iso(self._clock.now()), item_id],
            )
        if not items:
            return [], None
        return items, SyncWrite(
            "memory_deletion",
            {"scope": "profile_revoke", "id": key, "item_ids": items, "profile_keys": keys},
        )
