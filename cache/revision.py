"""Memory that changes its mind (SPEC §5.4): evidence windows, contested and superseded values.

- Evidence counts only inside `window_days` local days of now, and for a value that was
  superseded only evidence that arrived after it was superseded ("fresh"): one stale mention
  never promotes, re-confirms or revives anything.
- A confirmed value is *contested* while another value of its key has, since the confirmation
  and inside the window, at least `contest_mentions` mentions on `contest_days` distinct days,
  and more distinct days than the confirmed value itself had in that span (so the user coming
  back to it lifts the contest). A contested value leaves the snapshot and stays in the cache.
  The contest is worked out again whenever the key gets evidence.
- Confirming a value supersedes the key's other confirmed value: `superseded_by` on the old,
  `supersedes` on the new one, the old back to `candidate` with its evidence kept.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from a2a_common.clock import iso
from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD
from cache.model import PromotionPolicy


def window_start(today: str, policy: PromotionPolicy) -> str:
    """The first local day whose evidence still counts (`today` is YYYY-MM-DD)."""
    first = date.fromisoformat(today) - timedelta(days=policy.window_days - 1)
    return first.isoformat()


def counted(
    db: Database,
    item_id: str,
    first_day: str,
    since: str | None,
    without_pair: str = "",
    upto: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """(evidence rows, distinct days) of an item inside the window, after `since` if given,
    leaving out `without_pair`'s (the arriving turn's, to judge the item as it stood).

    With `upto` (rows, days) each count stops there: promotion only asks whether the
    thresholds are reached, so a mention reads a few index entries however many the item has
    (issue 36): the rows through a LIMIT, the days by seeking from one day to the next on
    `profile_evidence_window` (item_id, day) instead of visiting every entry of each day."""
    rows, days = upto if upto is not None else (-1, -1)  # LIMIT -1: no limit
    row = db.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM profile_evidence"
        "  WHERE item_id = :item AND day >= :first AND created_at > :since"
        "  AND pair_id != :without LIMIT :rows)),"
        " (WITH RECURSIVE d(day) AS ("
        "  SELECT (SELECT day FROM profile_evidence WHERE item_id = :item AND day >= :first"
        "   AND created_at > :since AND pair_id != :without ORDER BY day LIMIT 1)"
        "  UNION ALL"
        "  SELECT (SELECT day FROM profile_evidence e WHERE e.item_id = :item AND e.day > d.day"
        "   AND e.created_at > :since AND e.pair_id != :without ORDER BY e.day LIMIT 1)"
        "  FROM d WHERE d.day IS NOT NULL LIMIT :days)"
        " SELECT count(day) FROM d)",
        {
            "item": item_id,
            "first": first_day,
            "since": since or "",
            "without": without_pair,
            "rows": rows,
            "days": days,
        },
    ).fetchone()
    return int(row[0]), int(row[1])


def evidence_days(db: Database, item_id: str) -> list[str]:
    """Every local day the item has evidence on, in order: one index seek a day, not a visit
    of every evidence row (an item mentioned each day has thousands)."""
    rows = db.execute(
        "WITH RECURSIVE d(day) AS ("
        " SELECT (SELECT min(day) FROM profile_evidence WHERE item_id = :item)"
        " UNION ALL"
        " SELECT (SELECT e.day FROM profile_evidence e WHERE e.item_id = :item AND e.day > d.day"
        "  ORDER BY e.day LIMIT 1) FROM d WHERE d.day IS NOT NULL)"
        " SELECT day FROM d WHERE day IS NOT NULL",
        {"item": item_id},
    ).fetchall()
    return [day for (day,) in rows]


def recontest(
    db: Database, key: str, first_day: str, policy: PromotionPolicy, person: str = HOUSEHOLD
) -> None:
    """Set or lift the contest on the key's confirmed value of `person` (see the module's rule;
    a key's values are one person's: another's evidence never contests them, SPEC §5.7)."""
    held = db.execute(
        "SELECT item_id, confirmed_at FROM profile_items WHERE key = ? AND status = 'confirmed'"
        " AND person_id = ? ORDER BY item_id",
        [key, person],
    ).fetchall()
    for item_id, confirmed_at in held:
        rows = db.execute(
            "SELECT e.item_id, count(*), count(DISTINCT e.day) FROM profile_evidence e"
            " JOIN profile_items i ON i.item_id = e.item_id"
            " WHERE i.key = ? AND i.person_id = ? AND e.day >= ? AND e.created_at > ?"
            " GROUP BY e.item_id",
            [key, person, first_day, confirmed_at or ""],
        ).fetchall()
        own = next((days for iid, _m, days in rows if iid == item_id), 0)
        rivals = sorted(
            (-days, -mentions, iid)
            for iid, mentions, days in rows
            if iid != item_id
            and mentions >= policy.contest_mentions
            and days >= policy.contest_days
            and days > own
        )
        db.execute(
            "UPDATE profile_items SET contested_by = ? WHERE item_id = ?",
            [rivals[0][2] if rivals else None, item_id],
        )


def supersede(
    db: Database, key: str, new_item_id: str, now: datetime, person: str = HOUSEHOLD
) -> None:
    """`new_item_id` was just confirmed: the key's other confirmed value (the same person's)
    is superseded by it."""
    old = db.execute(
        "SELECT item_id FROM profile_items WHERE key = ? AND status = 'confirmed'"
        " AND person_id = ? AND item_id != ? ORDER BY item_id",
        [key, person, new_item_id],
    ).fetchall()
    stamp = iso(now)
    for (old_id,) in old:
        db.execute(
            "UPDATE profile_items SET status = 'candidate', superseded_by = ?, superseded_at = ?,"
            " contested_by = NULL, updated_at = ? WHERE item_id = ?",
            [new_item_id, stamp, stamp, old_id],
        )
    db.execute(
        "UPDATE profile_items SET confirmed_at = ?, contested_by = NULL, superseded_by = NULL,"
        " supersedes = coalesce(?, supersedes) WHERE item_id = ?",
        [stamp, old[-1][0] if old else None, new_item_id],
    )


def state_of(status: str, contested_by: str | None, superseded_by: str | None) -> str:
    """What `memory show` tells: the status, or why the item is not what it seems."""
    if status == "confirmed" and contested_by:
        return "contested"
    if status != "confirmed" and superseded_by:
        return "superseded"
    return status
