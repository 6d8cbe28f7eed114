"""Whose a cloud update's entry is (SPEC §5.7, §3.2): the device is the truth about whose words
are whose (docs/design.md, *Whose a cloud update is*).

An entry (a daily summary, a weekly digest, a profile item) whose sources the device holds takes
their person: one named (on the entry, else for the whole `updates`) that contradicts them, or
sources of two people, refuse it. Sources the device does not hold say nothing: the named person
is taken, and with no one named the entry is refused (the household's words are only those with
no source at all: a text with sources is someone's). No source and no one named: the household's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD

# source list -> (table, id column) holding the person of each id
_SOURCES = {
    "source_session_ids": ("sessions", "session_id"),
    "source_pair_ids": ("pairs", "pair_id"),
    "source_summary_ids": ("daily_summaries", "summary_id"),
    "source_candidate_ids": ("profile_evidence", "candidate_id"),
}


@dataclass(frozen=True)
class Owner:
    person: str | None  # None: refused
    reason: str = ""


def _people(db: Database, entry: Mapping[str, Any]) -> tuple[set[str], bool]:
    """The people of the sources the device holds; whether the entry lists any source."""
    people: set[str] = set()
    listed = False
    for field, (table, column) in _SOURCES.items():
        ids = [i for i in entry.get(field) or [] if isinstance(i, str)]
        if not ids:
            continue
        listed = True
        marks = ", ".join("?" * len(ids))
        rows = db.execute(
            f"SELECT DISTINCT person_id FROM {table} WHERE {column} IN ({marks})", ids
        ).fetchall()
        people.update(str(r[0]) for r in rows)
    return people, listed


def owner(db: Database, entry: Mapping[str, Any], updates: Mapping[str, Any]) -> Owner:
    """Whose `entry` of `updates` is, or why it is refused (ids only: no words)."""
    named = entry.get("person_id") or updates.get("person_id") or None
    people, listed = _people(db, entry)
    if len(people) > 1:
        return Owner(None, f"its sources are of {len(people)} people ({', '.join(sorted(people))})")
    if people:
        (theirs,) = people
        if named is not None and named != theirs:
            return Owner(None, f"names {named}, its sources are {theirs}'s")
        return Owner(theirs)
    if named is not None:
        return Owner(str(named))
    if listed:
        return Owner(None, "its sources are not on this device and it names no person")
    return Owner(HOUSEHOLD)
