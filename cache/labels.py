"""Categories on every text the device keeps (SPEC §5.5), both ways along provenance.

A text's categories are, in this order (the first is its `category`): what the cloud said, what
its sources carry, what the lexicon finds in it. They only ever grow: a later signal never
makes a text less sensitive. Provenance, as it exists:
- a pair that is the source of a candidate (its evidence row, or a cloud item's
  `source_pair_ids`) takes the candidate's category, retroactively;
- a session summary has no per-pair provenance: it is derived from every pair of its session,
  so it carries the union of their categories (and a pair labelled later relabels it);
- a daily summary is derived from its `source_session_ids` (their pairs and summaries), a weekly
  digest from its `source_summary_ids` (daily summaries): each carries its sources' categories,
  and a source labelled later relabels it.
Every write runs in the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime

from a2a_common import jsonx
from a2a_common.clock import iso, parse_iso
from a2a_common.db import Database
from cache.privacy import PrivacyPolicy, category_name


def merge(*lists: Iterable[str | None]) -> list[str]:
    """Names in first-seen order, lower-cased, without duplicates or blanks."""
    out: list[str] = []
    for names in lists:
        for raw in names:
            name = category_name(raw)
            if name and name not in out:
                out.append(name)
    return out


def value_texts(value: object) -> list[str]:
    """The texts of a JSON value the lexicon reads: every string (keys too) as it is, not as
    JSON text (where a tab is the two characters `\\t` and would split no word)."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (str(k), *value_texts(v))]
    if isinstance(value, list):
        return [t for v in value for t in value_texts(v)]
    return [value] if isinstance(value, str) else [] if value is None else [str(value)]


def _marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


class Labels:
    def __init__(self, *, db: Database, privacy: PrivacyPolicy) -> None:
        self._db = db
        self.privacy = privacy

    def _list(self, sql: str, params: Sequence[object]) -> list[str]:
        out: list[str] = []
        for (raw,) in self._db.execute(sql, list(params)).fetchall():
            out = merge(out, json.loads(raw or "[]"))
        return out

    def _flag(self, categories: list[str]) -> int:
        return int(self.privacy.any_sensitive(categories))

    # --- pairs ---------------------------------------------------------------------------------
    def of_pair(self, pair_id: str) -> list[str]:
        return self._list("SELECT categories FROM pairs WHERE pair_id = ?", [pair_id])

    def of_item(self, item_id: str) -> list[str]:
        return self._list("SELECT categories FROM profile_items WHERE item_id = ?", [item_id])

    def label_pair(self, pair_id: str, *extra: Iterable[str | None], texts: bool = True) -> None:
        """Add categories to a pair (and the lexicon's, over its texts, when `texts`), set its
        expiry, and relabel what derives from it."""
        row = self._db.execute(
            "SELECT categories, user_text, assistant_text, created_at, session_id, expire_at,"
            " sensitive FROM pairs WHERE pair_id = ?",
            [pair_id],
        ).fetchone()
        if row is None:
            return
        found = self.privacy.categorize(row[1], row[2]) if texts else []
        old = json.loads(row[0])
        cats = merge(old, *extra, found)
        expire = self.privacy.expire_of(cats, parse_iso(row[3]))
        ends = [e for e in (iso(expire) if expire else None, row[5]) if e]
        params = [jsonx.dumps(cats), self._flag(cats), min(ends) if ends else None, pair_id]
        never = self.privacy.never_stored(cats)
        if not never and [row[0], row[6], row[5]] == params[:3]:
            return  # already so (most turns): no write; unchanged, nothing derives anew
        if never:  # `store: never`: the words are not kept
            self._db.execute(
                "UPDATE pairs SET categories = ?, sensitive = ?, expire_at = ?, user_text = '',"
                " assistant_text = '' WHERE pair_id = ?",
                params,
            )
        else:
            self._db.execute(
                "UPDATE pairs SET categories = ?, sensitive = ?, expire_at = ? WHERE pair_id = ?",
                params,
            )
        if cats != old:
            self.relabel_session(row[4], cats)

    # --- session summaries ---------------------------------------------------------------------
    def session_summary(
        self, session_id: str, summary: str, cloud_category: str | None = None
    ) -> bool:
        """Store a new session summary with its categories; when they say `store: never`, the
        session keeps no summary (False)."""
        pairs = self._list(
            "SELECT summary_categories FROM sessions WHERE session_id = ?", [session_id]
        )  # the union of its pairs' categories, kept by `relabel_session`
        cats = merge([cloud_category], pairs, self.privacy.categorize(summary))
        if self.privacy.never_stored(cats):
            self._db.execute("UPDATE sessions SET summary = '' WHERE session_id = ?", [session_id])
            return False
        self._db.execute(
            "UPDATE sessions SET summary = ?, summary_categories = ?, summary_sensitive = ?"
            " WHERE session_id = ?",
            [summary, jsonx.dumps(cats), self._flag(cats), session_id],
        )
        if cats != pairs:  # as in `relabel_session`: what derives from it carries the old ones
            self.relabel_dailies([session_id])
        return True

    def relabel_session(self, session_id: str, added: list[str]) -> None:
        """A pair of the session got `added`: its summary carries them too (the union of
        its pairs' categories is kept as it grows, never recounted)."""
        row = self._db.execute(
            "SELECT summary_categories FROM sessions WHERE session_id = ?", [session_id]
        ).fetchone()
        if row is None:
            return
        old = json.loads(row[0])
        cats = merge(old, added)
        if cats == old:
            return
        if self.privacy.never_stored(cats):
            self._db.execute("UPDATE sessions SET summary = '' WHERE session_id = ?", [session_id])
        self._db.execute(
            "UPDATE sessions SET summary_categories = ?, summary_sensitive = ?"
            " WHERE session_id = ?",
            [jsonx.dumps(cats), self._flag(cats), session_id],
        )
        self.relabel_dailies([session_id])

    # --- daily summaries and digests -----------------------------------------------------------
    def of_sessions(self, session_ids: list[str]) -> list[str]:
        if not session_ids:
            return []
        marks = _marks(session_ids)
        return merge(
            self._list(f"SELECT categories FROM pairs WHERE session_id IN ({marks})", session_ids),
            self._list(
                f"SELECT summary_categories FROM sessions WHERE session_id IN ({marks})",
                session_ids,
            ),
        )

    def of_dailies(self, summary_ids: list[str]) -> list[str]:
        if not summary_ids:
            return []
        return self._list(
            f"SELECT categories FROM daily_summaries WHERE summary_id IN ({_marks(summary_ids)})",
            summary_ids,
        )

    def derived(
        self, text: str, cloud_category: str | None, sources: list[str], now: datetime
    ) -> tuple[list[str], str | None]:
        """A summary's or digest's categories (given its sources' own) and the expiry they ask."""
        cats = merge([cloud_category], sources, self.privacy.categorize(text))
        expire = self.privacy.expire_of(cats, now)
        return cats, iso(expire) if expire else None

    def _relabel(self, table: str, id_column: str, column: str, gone: list[str]) -> list[str]:
        """Rows of `table` citing any of `gone` in `column` get their sources' categories."""
        rows = self._db.execute(
            f"SELECT {id_column}, categories, {column} FROM {table} WHERE EXISTS (SELECT 1 FROM"
            f" json_each({table}.{column}) WHERE value IN ({_marks(gone)}))",
            gone,
        ).fetchall()
        changed = []
        for row_id, raw, sources in rows:
            ids = json.loads(sources)
            of = self.of_sessions(ids) if table == "daily_summaries" else self.of_dailies(ids)
            old = json.loads(raw)
            cats = merge(old, of)
            if cats != old:
                self._db.execute(
                    f"UPDATE {table} SET categories = ?, sensitive = ? WHERE {id_column} = ?",
                    [jsonx.dumps(cats), self._flag(cats), row_id],
                )
                changed.append(row_id)
        return changed

    def relabel_dailies(self, session_ids: list[str]) -> None:
        changed = self._relabel("daily_summaries", "summary_id", "source_session_ids", session_ids)
        if changed:
            self._relabel("weekly_digests", "digest_id", "source_summary_ids", changed)
