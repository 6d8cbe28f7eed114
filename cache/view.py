"""What the snapshot reads, with bounded, indexed queries (never "load all, then trim").

Left out here, so the pure builder never sees them: pending pairs, anything whose `expire_at`
has passed, profile items that are not `confirmed` or are contested (SPEC §5.4), and — in
every tier, pairs, the session summary, daily summaries, the digest and profile items alike —
texts of a category the policy keeps out of snapshots (`share = false`, or sensitive without
consent; SPEC §5.5). Sensitivity is the stored flag or the category's name in the current
policy, compared lower-cased. A text left out leaves no hole: what derives from it carries its
categories (`cache.labels`), so it is left out too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from a2a_common.clock import iso
from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD
from cache.lasting import Lasting, LastingCache
from cache.model import CacheView, DailySummary, PairView, ProfileView, SyncPosition
from cache.privacy import PrivacyPolicy
from cache.snapshot import MAX_DAILY

_LIVE = "(expire_at IS NULL OR expire_at > ?)"


def _marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


def shown_texts(
    cats: str, flag: str, blocked: list[str], consented: list[str]
) -> tuple[str, list[str]]:
    """SQL (and its parameters) true for a row whose JSON list `cats` holds no blocked category
    and which, when flagged sensitive, holds a consented one."""
    clauses, params = [], []
    if blocked:
        clauses.append(
            f"NOT EXISTS (SELECT 1 FROM json_each({cats}) WHERE value IN ({_marks(blocked)}))"
        )
        params += blocked
    if consented:
        clauses.append(
            f"({flag} = 0 OR EXISTS (SELECT 1 FROM json_each({cats})"
            f" WHERE value IN ({_marks(consented)})))"
        )
        params += consented
    else:
        clauses.append(f"{flag} = 0")
    return " AND ".join(clauses), params


def _item_shown(shown: Shown) -> tuple[str, list[str]]:
    """SQL true for a profile item the policy and this consent show: its own category (the
    column) and its categories (the list)."""
    blocked, allowed = list(shown.blocked), list(shown.allowed)
    name = "lower(coalesce(category, ''))"
    item_shown = f"{name} NOT IN ({_marks(blocked)})" if blocked else "1"
    item_shown += f" AND (sensitive = 0 OR {name} IN ({_marks(allowed)}))" if allowed else ""
    item_shown += "" if allowed else " AND sensitive = 0"
    texts, params = shown.texts()
    return f"{item_shown} AND {texts}", [*blocked, *allowed, *params]


def _items(
    db: Database, stamp: str, whose: tuple[str, list[str]], limit: int
) -> list[tuple[Any, ...]]:
    """Confirmed, uncontested, live profile items the policy shows, most relevant first."""
    shown, params = whose
    rows: list[tuple[Any, ...]] = db.execute(
        "SELECT key, value, category, confidence, relevance_score,"
        " coalesce(confirmed_at, updated_at), expire_at FROM profile_items"
        f" WHERE status = 'confirmed' AND contested_by IS NULL AND {_LIVE}"
        f" AND {shown} ORDER BY relevance_score DESC, key, item_id LIMIT ?",
        [stamp, *params, limit],
    ).fetchall()
    return rows


@dataclass(frozen=True)
class Shown:
    """What the policy and consent leave in a snapshot: the categories whose texts stay out,
    and those consent is held for (both sorted, lower-cased)."""

    blocked: tuple[str, ...]
    allowed: tuple[str, ...]

    @staticmethod
    def of(policy: PrivacyPolicy, consented: frozenset[str]) -> Shown:
        held = frozenset(c.strip().lower() for c in consented)
        return Shown(tuple(policy.blocked(held)), tuple(sorted(held)))

    def texts(self, cats: str = "categories", flag: str = "sensitive") -> tuple[str, list[str]]:
        return shown_texts(cats, flag, list(self.blocked), list(self.allowed))


@dataclass(frozen=True)
class Whose:
    """Whose texts a turn may see (SPEC §5.7): the person's own, each under the person's
    consent, and the household's under the household's; a household turn sees only the
    household's. Never another person's."""

    person: str
    own: Shown  # the person's consent (the household's when the person is the household)
    household: Shown

    def sides(
        self, clause: Callable[[Shown], tuple[str, list[str]]]
    ) -> list[tuple[str, str, list[str]]]:
        """(person, `clause` under that person's consent, its parameters) of each side: the
        household's, then the person's own (when the turn is someone's)."""
        out = [(HOUSEHOLD, *clause(self.household))]
        if self.person != HOUSEHOLD:
            out.append((self.person, *clause(self.own)))
        return out

    def clause(self, clause: Callable[[Shown], tuple[str, list[str]]]) -> tuple[str, list[str]]:
        """`clause` (what a `Shown` lets through) per side, joined by whose the row is."""
        sides = self.sides(clause)
        sql = " OR ".join(f"(person_id = ? AND {side})" for _, side, _ in sides)
        return f"({sql})", [p for person, _, ps in sides for p in [person, *ps]]

    def texts(self, cats: str = "categories", flag: str = "sensitive") -> tuple[str, list[str]]:
        return self.clause(lambda shown: shown.texts(cats, flag))


def read_lasting(
    db: Database, *, stamp: str, shown: Whose, max_profile_items: int, max_daily: int
) -> Lasting:
    """The daily summaries, the digest and the profile items a snapshot may use at `stamp`,
    with the first expiry among them (`cache.lasting`). The digest is the person's newest,
    else the household's."""
    sql, params = shown.texts()
    daily = db.execute(
        f"SELECT day, summary, expire_at FROM daily_summaries WHERE {_LIVE} AND {sql}"
        " ORDER BY day DESC LIMIT ?",
        [stamp, *params, max_daily],
    ).fetchall()
    digest = db.execute(
        f"SELECT digest, expire_at FROM weekly_digests WHERE {_LIVE} AND {sql}"
        f" ORDER BY person_id = '{HOUSEHOLD}', week DESC LIMIT 1",
        [stamp, *params],
    ).fetchone()
    items = _items(db, stamp, shown.clause(_item_shown), max_profile_items)
    ends = [r[-1] for r in (*daily, *items, *([digest] if digest else [])) if r[-1]]
    return Lasting(
        daily_summaries=tuple(DailySummary(d, s) for d, s, _ in daily),
        weekly_digest=digest[0] if digest else "",
        profile_items=tuple(
            ProfileView(k, json.loads(v), c, conf, rel, up) for k, v, c, conf, rel, up, _ in items
        ),
        until=min(ends) if ends else None,
    )


def _recent_pairs(db: Database, stamp: str, shown: Whose, limit: int) -> list[tuple[Any, ...]]:
    """The newest answered, live, shown pairs of the turn's sides: each side's newest from the
    (person, time) index, then the newest of those (one OR over both sides made SQLite read and
    sort every pair of both)."""
    parts, params = [], []
    for person, sql, side_params in shown.sides(lambda s: s.texts()):
        parts.append(
            "SELECT * FROM (SELECT user_text, assistant_text, route_family, created_at, pair_id"
            f" FROM pairs WHERE person_id = ? AND status != 'pending' AND {_LIVE} AND {sql}"
            " ORDER BY created_at DESC, pair_id DESC LIMIT ?)"
        )
        params += [person, stamp, *side_params, limit]
    rows = db.execute(
        " UNION ALL ".join(parts) + " ORDER BY created_at DESC, pair_id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [row[:3] for row in rows]


def read_view(
    db: Database,
    *,
    session_id: str | None,
    now: datetime,
    recent_pairs: int,
    consented: frozenset[str],
    privacy: PrivacyPolicy | None = None,
    max_profile_items: int = 64,
    max_daily: int = MAX_DAILY,
    lasting: LastingCache | None = None,
    person: str = HOUSEHOLD,
    household_consented: frozenset[str] | None = None,
) -> CacheView:
    """The view of one turn of `person` at `now` (`consented`: the person's consent;
    `household_consented`: the household's, when the person is someone else); its lasting
    part from `lasting` when given (kept between turns while nothing it was read from
    changed), else read here."""
    stamp = iso(now)
    policy = privacy or PrivacyPolicy()
    own = Shown.of(policy, consented)
    home = own if household_consented is None else Shown.of(policy, household_consented)
    shown = Whose(person, own, own if person == HOUSEHOLD else home)
    pairs = _recent_pairs(db, stamp, shown, recent_pairs)
    summary = None
    if session_id is not None:
        s_sql, s_params = shown.texts("summary_categories", "summary_sensitive")
        summary = db.execute(
            f"SELECT summary FROM sessions WHERE session_id = ? AND {s_sql}",
            [session_id, *s_params],
        ).fetchone()
    read = partial(
        read_lasting,
        db,
        stamp=stamp,
        shown=shown,
        max_profile_items=max_profile_items,
        max_daily=max_daily,
    )
    kept = (
        read()
        if lasting is None
        else lasting.get((shown, max_profile_items, max_daily), stamp, read)
    )
    sync = db.execute("SELECT cursor, version FROM sync_position WHERE id = 1").fetchone()
    return CacheView(
        recent_pairs=tuple(PairView(u, a, r) for u, a, r in reversed(pairs)),
        session_summary=summary[0] if summary else "",
        daily_summaries=kept.daily_summaries,
        weekly_digest=kept.weekly_digest,
        profile_items=kept.profile_items,
        sync=SyncPosition(*sync) if sync else SyncPosition(),
    )
