"""The consent register (SPEC §5.6): what the person at the robot agreed to, kept on the device.

Consent is state, never a flag a request carries. A grant is `{"scope": "category:<name>" |
"capability:<id>", "granted_at", "expires_at"?, "source"}`; it is held while it has not
expired (`expires_at` after the injected clock's now), whether or not the expiry has been
noticed yet. Grants also stand in config (`privacy.consented_categories`,
`privacy.consented_capabilities`, source `config`): those cannot be revoked from the UI, only
by changing the config. Every grant, revoke and noticed expiry is one row of `consent_audit`
(append-only: triggers refuse UPDATE and DELETE; ids and scopes only, no user words) and one
`consent` write for the cloud's memory sync, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from a2a_common.clock import Clock, iso, parse_iso
from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD
from a2a_common.sqlite import Migration
from a2a_common.writes import SyncWrite

MAX_TTL_S = 366 * 86400  # a grant asks again at least once a year
SCOPE_PATTERN = r"^(category|capability):[A-Za-z0-9_.\-]{1,64}$"


def _v1(db: Database) -> None:
    db.table("consent_grants").create(
        {"scope": str, "granted_at": str, "expires_at": str, "source": str, "request_id": str},
        pk="scope",
        not_null={"granted_at", "source"},
    )
    db.execute(  # AUTOINCREMENT and triggers: raw SQL
        """CREATE TABLE consent_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts TEXT NOT NULL,
            action TEXT NOT NULL,
            scope TEXT NOT NULL,
            source TEXT NOT NULL,
            request_id TEXT,
            expires_at TEXT)"""
    )
    db.execute(
        "CREATE TRIGGER consent_audit_append_only BEFORE UPDATE ON consent_audit"
        " BEGIN SELECT RAISE(ABORT, 'consent_audit is append-only'); END"
    )
    db.execute(
        "CREATE TRIGGER consent_audit_no_delete BEFORE DELETE ON consent_audit"
        " BEGIN SELECT RAISE(ABORT, 'consent_audit is append-only'); END"
    )


def _v2(db: Database) -> None:
    """Consent per person (SPEC §5.7): a grant is someone's — a person's, or the household's
    (every grant kept before, and every grant that names no person). The key becomes (person,
    scope): a rebuilt table (a primary key cannot change in place); the audit gets the column."""
    db.execute(
        """CREATE TABLE consent_grants_people (
            person_id TEXT NOT NULL DEFAULT 'household',
            scope TEXT NOT NULL,
            granted_at TEXT NOT NULL,
            expires_at TEXT,
            source TEXT NOT NULL,
            request_id TEXT,
            PRIMARY KEY (person_id, scope)) WITHOUT ROWID"""
    )
    db.execute(
        "INSERT INTO consent_grants_people (scope, granted_at, expires_at, source, request_id)"
        " SELECT scope, granted_at, expires_at, source, request_id FROM consent_grants"
    )
    db.execute("DROP TABLE consent_grants")
    db.execute("ALTER TABLE consent_grants_people RENAME TO consent_grants")
    db.execute("ALTER TABLE consent_audit ADD COLUMN person_id TEXT NOT NULL DEFAULT 'household'")


MIGRATIONS = [Migration("edge_0005_consent_register", _v1)]
MIGRATIONS_2 = [Migration("edge_0009_consent_per_person", _v2)]


@dataclass(frozen=True)
class Grant:
    scope: str
    granted_at: datetime
    expires_at: datetime | None
    source: str
    person: str = HOUSEHOLD  # whose grant (SPEC 5.7)

    @property
    def kind(self) -> str:
        return self.scope.partition(":")[0]

    @property
    def name(self) -> str:
        return self.scope.partition(":")[2]

    def held(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now

    def wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "scope": self.scope,
            "granted_at": iso(self.granted_at),
            "source": self.source,
        }
        if self.expires_at is not None:
            body["expires_at"] = iso(self.expires_at)
        if self.person != HOUSEHOLD:
            body["person"] = self.person
        return body


def normal_scope(scope: str) -> str:
    """Category names compare case-insensitively (SPEC §5.5); capability ids as written."""
    kind, _, name = scope.partition(":")
    return f"{kind}:{name.lower()}" if kind == "category" else scope


class ConsentRegister:
    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        categories: Iterable[str] = (),
        capabilities: Iterable[str] = (),
    ) -> None:
        self._db = db
        self._clock = clock
        self._standing: dict[str, Grant] = {}
        self.set_standing(categories, capabilities)

    def set_standing(self, categories: Iterable[str], capabilities: Iterable[str]) -> None:
        """Grants standing in config (at start and on SIGHUP)."""
        since = self._clock.now()
        scopes = [f"category:{c.strip().lower()}" for c in categories if c.strip()]
        scopes += [f"capability:{c.strip()}" for c in capabilities if c.strip()]
        self._standing = {s: Grant(s, since, None, "config") for s in scopes}

    def standing(self, scope: str) -> bool:
        return scope in self._standing

    # --- reads --------------------------------------------------------------------------------
    def _stored(self) -> list[Grant]:
        rows = self._db.execute(
            "SELECT scope, granted_at, expires_at, source, person_id FROM consent_grants"
            " ORDER BY person_id = 'household' DESC, person_id, scope"
        ).fetchall()
        return [
            Grant(r[0], parse_iso(r[1]), parse_iso(r[2]) if r[2] else None, r[3], r[4])
            for r in rows
        ]

    def held(self) -> list[Grant]:
        """Every grant held now: the stored ones not yet expired (the household's first), and
        the config's (the household's)."""
        now = self._clock.now()
        stored = {(g.person, g.scope): g for g in self._stored() if g.held(now)}
        standing = (g for s, g in self._standing.items() if (HOUSEHOLD, s) not in stored)
        return [*stored.values(), *standing]

    def categories(self, person: str = HOUSEHOLD) -> frozenset[str]:
        """The categories `person`'s grants cover (SPEC 5.7: a person's own; the household's
        — config's standing ones included — cover the household's texts only)."""
        return frozenset(g.name for g in self.held() if g.kind == "category" and g.person == person)

    def capabilities(self, person: str = HOUSEHOLD) -> frozenset[str]:
        """The capabilities a workflow of `person`'s turn may use (SPEC 5.6, 5.7): the
        household's grants (config's standing ones included) cover anyone's workflow, a
        person's grant covers only the workflows that person's turns start; a workflow with no
        turn (pushed) is the household's (docs/design.md, *Whose capability grant*)."""
        return frozenset(
            g.name
            for g in self.held()
            if g.kind == "capability" and g.person in (HOUSEHOLD, person)
        )

    def next_expiry(self) -> datetime | None:
        row = self._db.execute(
            "SELECT MIN(expires_at) FROM consent_grants WHERE expires_at IS NOT NULL"
        ).fetchone()
        return parse_iso(row[0]) if row and row[0] else None

    def audit(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest audit rows, each with whose grant it was (`person`, SPEC 5.7)."""
        rows = self._db.execute(
            "SELECT ts, action, scope, person_id, source, request_id, expires_at"
            " FROM consent_audit ORDER BY id DESC LIMIT ?",
            [limit],
        ).fetchall()
        keys = ("ts", "action", "scope", "person", "source", "request_id", "expires_at")
        return [{k: v for k, v in zip(keys, r, strict=True) if v is not None} for r in rows]

    # --- changes (inside the caller's transaction) --------------------------------------------
    def grant(
        self,
        scope: str,
        ttl_s: float | None,
        source: str,
        request_id: str | None,
        person: str = HOUSEHOLD,
    ) -> Grant:
        """`person`'s, held from now (a grant of a held scope starts again with the new ttl)."""
        now = self._clock.now()
        expires = now + timedelta(seconds=ttl_s) if ttl_s is not None else None
        grant = Grant(scope, now, expires, source, person)
        self._db.execute(
            "INSERT OR REPLACE INTO consent_grants (scope, granted_at, expires_at, source,"
            " request_id, person_id) VALUES (?, ?, ?, ?, ?, ?)",
            [scope, iso(now), iso(expires) if expires else None, source, request_id, person],
        )
        self._audit("grant", scope, source, request_id, expires, person)
        return grant

    def revoke(
        self, scope: str, source: str, request_id: str | None, person: str = HOUSEHOLD
    ) -> bool:
        """False when no stored grant of `person` held it (nothing changes, nothing is
        audited)."""
        now = self._clock.now()
        held = [
            g for g in self._stored() if g.scope == scope and g.person == person and g.held(now)
        ]
        self._db.execute(
            "DELETE FROM consent_grants WHERE scope = ? AND person_id = ?", [scope, person]
        )
        if not held:
            return False
        self._audit("revoke", scope, source, request_id, None, person)
        return True

    def expire(self) -> list[Grant]:
        """The stored grants whose time has passed: gone, audited; what they covered ends."""
        now = self._clock.now()
        gone = [g for g in self._stored() if not g.held(now)]
        for grant in gone:
            self._db.execute(
                "DELETE FROM consent_grants WHERE scope = ? AND person_id = ?",
                [grant.scope, grant.person],
            )
            self._audit("expire", grant.scope, grant.source, None, grant.expires_at, grant.person)
        return gone

    def _audit(
        self,
        action: str,
        scope: str,
        source: str,
        request_id: str | None,
        expires: datetime | None,
        person: str = HOUSEHOLD,
    ) -> None:
        self._db.execute(
            "INSERT INTO consent_audit (ts, action, scope, source, request_id, expires_at,"
            " person_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [iso(self._clock.now()), action, scope, source, request_id, _iso(expires), person],
        )

    def write(
        self,
        action: str,
        scope: str,
        source: str,
        expires: datetime | None,
        person: str = HOUSEHOLD,
    ) -> SyncWrite:
        """The `consent` write the cloud is told (SPEC §3.2 as this build extends it), with
        whose grant it is (SPEC 5.7)."""
        payload: dict[str, Any] = {
            "action": action,
            "scope": scope,
            "source": source,
            "at": iso(self._clock.now()),
            "person_id": person,
        }
        if expires is not None:
            payload["expires_at"] = iso(expires)
        return SyncWrite("consent", payload)


def _iso(ts: datetime | None) -> str | None:
    return iso(ts) if ts is not None else None
