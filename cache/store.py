"""The memory cache's rows: the shell around the pure snapshot/update/session functions.

Every write method expects to run inside the caller's transaction (`db.atomic()`), so a turn's
pair, its session and the messages it causes commit together.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso
from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD
from a2a_common.writes import SyncWrite
from cache import owed
from cache.errors import CacheError
from cache.model import CacheCounts, SessionRow, SyncPosition
from cache.update import UpdateChanges


class CacheStore:
    def __init__(self, *, db: Database) -> None:
        self._db = db

    def _one(self, sql: str, params: list[Any] | None = None) -> Any:
        try:
            return self._db.execute(sql, params or []).fetchone()
        except sqlite3.Error as exc:
            raise CacheError(f"cache read failed: {exc}") from exc

    # --- sessions ---------------------------------------------------------------------------
    def latest_session(self, person: str = HOUSEHOLD) -> SessionRow | None:
        """The person's newest session (sessions are per person, SPEC §5.7): the one of the
        latest turn, which is the one entered last (`enter_session`, cache_0010); its last
        turn is the person's newest pair when that one is not answered yet (`close_pair`)."""
        row = self._one(
            "SELECT session_id, max(last_turn_at, coalesce((SELECT max(created_at) FROM pairs"
            " WHERE person_id = ?1), '')) FROM sessions WHERE person_id = ?1"
            " ORDER BY entered_at DESC LIMIT 1",
            [person],
        )
        return SessionRow(row[0], row[1]) if row else None

    def latest_sessions(self) -> list[SessionRow]:
        """Every person's newest session (and the household's), its last turn as in
        `latest_session`."""
        rows = self._db.execute(
            "SELECT session_id, last_turn_at, person_id, max(entered_at) FROM sessions"
            " GROUP BY person_id ORDER BY 1"
        ).fetchall()
        newest = "SELECT max(created_at) FROM pairs WHERE person_id = ?"
        return [SessionRow(r[0], max(r[1], self._one(newest, [r[2]])[0] or "")) for r in rows]

    def session_person(self, session_id: str) -> str | None:
        """Whose session it is; None for a session not kept."""
        row = self._one("SELECT person_id FROM sessions WHERE session_id = ?", [session_id])
        return str(row[0]) if row else None

    def person_of_pair(self, pair_id: str) -> str:
        row = self._one("SELECT person_id FROM pairs WHERE pair_id = ?", [pair_id])
        return str(row[0]) if row else HOUSEHOLD

    def enter_session(self, session_id: str, now: datetime, person: str = HOUSEHOLD) -> None:
        """A turn at `now` in a session that was not its person's latest (new, or taken up
        again). A turn that goes on in the latest session writes no session row at its
        take-in (issue 36: a WAL frame, and its index entry as last_turn_at moved): its answer
        moves `last_turn_at` on (`close_pair`), in the commit that writes the session's
        summary, and until then its pair tells when it came (`latest_session`)."""
        stamp = iso(now)
        self._db.execute(
            "INSERT INTO sessions (session_id, started_at, last_turn_at, person_id, entered_at)"
            " VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET last_turn_at = excluded.last_turn_at,"
            " entered_at = excluded.entered_at",
            [session_id, stamp, stamp, person, stamp],
        )

    # --- pairs ------------------------------------------------------------------------------
    def record_utterance(
        self,
        *,
        pair_id: str,
        turn_id: str,
        session_id: str,
        text: str,
        now: datetime,
        person: str = HOUSEHOLD,
    ) -> None:
        self._db.execute(
            "INSERT INTO pairs (pair_id, turn_id, session_id, user_text, created_at, person_id)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [pair_id, turn_id, session_id, text, iso(now), person],
        )

    def turn_recorded(self, turn_id: str) -> bool:
        """A stored utterance carries this turn id (`pairs.turn_id` is unique)."""
        row = self._db.execute("SELECT 1 FROM pairs WHERE turn_id = ?", [turn_id]).fetchone()
        return row is not None

    def turn_ordinal(self) -> int:
        """A number each recorded utterance moves on (the pairs' largest rowid; 0 for none):
        the turn's part of the standing context's rotation (`relevance.turn_key`)."""
        row = self._db.execute("SELECT max(rowid) FROM pairs").fetchone()
        return int(row[0] or 0)

    def pending_turns(self) -> list[tuple[str, str]]:
        """(turn_id, pair_id) of utterances recorded but never answered, then of those a
        forget removed before their answer (owed all the same: cache/owed.py). Read once per
        start: it scans the pairs (no index of pending ones, cache_0009; ~5 ms a year)."""
        rows = self._db.execute(
            "SELECT turn_id, pair_id FROM pairs WHERE status = 'pending' ORDER BY created_at"
        ).fetchall()
        return [(r[0], r[1]) for r in rows] + sorted(owed.owed(self._db).items())

    def close_pair(
        self,
        pair_id: str,
        *,
        status: str,
        now: datetime,
        assistant_text: str = "",
        route_family: str | None = None,
        workflow_id: str = "",
    ) -> None:
        self._db.execute(
            "UPDATE pairs SET status = ?, assistant_text = ?, route_family = ?, workflow_id = ?,"
            " completed_at = ? WHERE pair_id = ?",
            [status, assistant_text, route_family, workflow_id, iso(now), pair_id],
        )
        self._db.execute(  # the turn's time is its session's last turn (`enter_session`)
            "UPDATE sessions SET last_turn_at = p.created_at FROM pairs p WHERE p.pair_id = ?"
            " AND sessions.session_id = p.session_id AND sessions.last_turn_at < p.created_at",
            [pair_id],
        )

    def turn_ids(
        self, scope: str, target: str | None, *, with_sources: bool = True
    ) -> list[str] | None:
        """The turns a forget of `scope` covers (None: every turn); a profile key's are those
        of its source pairs (unless `with_sources` is false)."""
        if scope == "all":
            return None
        if scope == "profile_key":
            if not with_sources:
                return []
            rows = self._db.execute(
                "SELECT turn_id FROM pairs WHERE pair_id IN (SELECT e.pair_id FROM"
                " profile_evidence e JOIN profile_items i USING (item_id) WHERE i.key = ?"
                " UNION SELECT j.value FROM profile_items i, json_each(i.source_pair_ids) j"
                " WHERE i.key = ?)",
                [target, target],
            )
            return [str(row[0]) for row in rows.fetchall()]
        column = {"pair": "pair_id", "session": "session_id", "person": "person_id"}.get(scope)
        if column is None:
            return []
        rows = self._db.execute(f"SELECT turn_id FROM pairs WHERE {column} = ?", [target])
        return [str(row[0]) for row in rows.fetchall()]

    def has_pair(self, pair_id: str) -> bool:
        return self._one("SELECT 1 FROM pairs WHERE pair_id = ?", [pair_id]) is not None

    def pair_write(self, pair_id: str) -> SyncWrite:
        """The `short_term_pair` sync write of a closed pair (with its category, if any)."""
        cursor = self._db.execute(
            "SELECT pair_id, turn_id, session_id, user_text, assistant_text, route_family,"
            " workflow_id, status, created_at, categories, person_id FROM pairs WHERE pair_id = ?",
            [pair_id],
        )
        names = [d[0] for d in cursor.description]
        payload = dict(zip(names, cursor.fetchone(), strict=True))
        categories = json.loads(payload.pop("categories"))
        if categories:
            payload["category"] = categories[0]
        return SyncWrite("short_term_pair", payload)

    def apply_changes(
        self, pair_id: str, session_id: str, changes: UpdateChanges, now: datetime
    ) -> None:
        self.close_pair(
            pair_id,
            status="ok",
            now=now,
            assistant_text=changes.assistant_text,
            route_family=changes.route_family,
            workflow_id=changes.workflow_id,
        )
        if changes.last_route is not None:
            self.set_state("last_route", changes.last_route)
        if changes.active_workflow_id is not None:
            self.set_state("active_workflow_id", changes.active_workflow_id)
        if changes.session_summary is not None:  # its categories: `Labels.session_summary`
            self._db.execute(
                "UPDATE sessions SET summary = ? WHERE session_id = ?",
                [changes.session_summary, session_id],
            )
        if changes.sync is not None:
            self.set_sync(changes.sync)

    def counts(self) -> CacheCounts:
        """The rows of every tier, counted in one statement (one read snapshot)."""
        row = self._one(
            "SELECT (SELECT count(*) FROM pairs), (SELECT count(*) FROM pairs WHERE synced = 0),"
            " (SELECT count(*) FROM pairs WHERE status = 'pending'),"
            " (SELECT count(*) FROM sessions), (SELECT count(*) FROM daily_summaries),"
            " (SELECT count(*) FROM weekly_digests)"
        )
        return CacheCounts(*(int(n) for n in row))

    def people_counts(self) -> dict[str, dict[str, int]]:
        """Per person: pairs, sessions, daily summaries, profile items (SPEC §5.7's `status`)."""
        out: dict[str, dict[str, int]] = {}
        for table, name in (
            ("pairs", "pairs"),
            ("sessions", "sessions"),
            ("daily_summaries", "daily_summaries"),
            ("profile_items", "profile_items"),
        ):
            rows = self._db.execute(
                f"SELECT person_id, count(*) FROM {table} GROUP BY person_id"
            ).fetchall()
            for person, count in rows:
                out.setdefault(str(person), {}).setdefault(name, 0)
                out[str(person)][name] = int(count)
        return {
            p: {k: c.get(k, 0) for k in ("pairs", "sessions", "daily_summaries", "profile_items")}
            for p, c in sorted(out.items())
        }

    # --- device state and sync position ------------------------------------------------------
    def state(self, key: str, default: Any = None) -> Any:
        row = self._one("SELECT value FROM device_state WHERE key = ?", [key])
        return json.loads(row[0]) if row else default

    def set_state(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT INTO device_state (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            " WHERE value IS NOT excluded.value",  # an unchanged row is not written again
            [key, jsonx.dumps(value)],
        )

    def set_sync(self, position: SyncPosition) -> None:
        self._db.execute(
            "UPDATE sync_position SET cursor = ?, version = ? WHERE id = 1",
            [position.cursor, position.version],
        )

    def mark_synced(self, pair_ids: list[str]) -> None:
        self._db.conn.executemany(
            "UPDATE pairs SET synced = 1 WHERE pair_id = ?", [(p,) for p in pair_ids]
        )

    def sync_position(self) -> SyncPosition:
        row = self._one("SELECT cursor, version FROM sync_position WHERE id = 1")
        return SyncPosition(row[0], row[1]) if row else SyncPosition()
