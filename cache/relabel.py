"""Stored texts labelled again when the lexicon changes (SPEC §5.5): a term added in
`privacy.lexicon_file` (then `a2a-edge reload`) or shipped by an upgrade must not leave the texts
already stored without the category it now finds.

`relabel_if_changed(memory)` compares the effective lexicon's fingerprint with the one kept in
`device_state` (`lexicon_fingerprint`; absent on a DB from before it: labelled again too) and,
when they differ, runs the lexicon over every stored text — pairs (and through them their
session summaries, daily summaries and digests, `cache.labels`), session summaries, daily
summaries, weekly digests, profile items — in one transaction, then keeps the new fingerprint.
Categories only grow. Queued sync writes need nothing more: the replayer asks
`SyncSink.withheld` again for every batch, which reads the labels as they are now.

It runs synchronously, at start before READY and in a reload before it is answered, paid once
per lexicon change; in exchange no turn and no sync batch ever sees a text labelled by the old
lexicon. Measured on the 2-core test machine: a year of history (bench.snapshot's fill: 20,000
pairs, 500 profile items) in ~0.17 s of CPU (it was 9.6 s: the lexicon worked each term's key out
again for every text, and every pair was read and written back one by one); with the Korean-aware
classifier (issue 33: more terms, predicates, patterns, near misses masked first) 0.30 s
(`python -m bench.classifier --relabel`). A pair with no
category, none found and no sensitive flag is skipped; the others go through `label_pair`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from a2a_common import jsonx
from a2a_common.clock import iso, parse_iso
from cache.labels import merge
from cache.memory import Memory

FINGERPRINT_KEY = "lexicon_fingerprint"
_DERIVED = (("daily_summaries", "summary_id", "summary"), ("weekly_digests", "digest_id", "digest"))

log = logging.getLogger("cache.relabel")


@dataclass(frozen=True)
class Relabelled:
    pairs: int
    summaries: int
    derived: int
    items: int


def relabel_if_changed(memory: Memory) -> Relabelled | None:
    """Label every stored text again when the lexicon is not the one they were labelled with;
    None when it is."""
    fingerprint = memory.policy.privacy.lexicon.fingerprint()
    if memory.state(FINGERPRINT_KEY) == fingerprint:
        return None
    with memory.db.atomic():
        done = Relabelled(_pairs(memory), _summaries(memory), _derived(memory), _items(memory))
        memory.store.set_state(FINGERPRINT_KEY, fingerprint)
    log.info("lexicon changed: stored texts labelled again (%s)", done)
    return done


def _pairs(memory: Memory) -> int:
    """Each pair through `Labels.label_pair`, except one with no category, none found and no
    sensitive flag: there it would write back what is stored (no category asks an expiry,
    none says `store: never`, nothing derived changes), so its read and write are skipped —
    most of a year's pairs, read in one pass."""
    privacy = memory.policy.privacy
    rows = memory.db.execute(
        "SELECT pair_id, categories, sensitive, user_text, assistant_text FROM pairs"
    ).fetchall()
    for pair_id, raw, sensitive, user, assistant in rows:
        if not sensitive and raw == "[]" and not privacy.categorize(user, assistant):
            continue
        memory.labels.label_pair(pair_id)
    return len(rows)


def _summaries(memory: Memory) -> int:
    rows = memory.db.execute(
        "SELECT session_id, summary FROM sessions WHERE summary != ''"
    ).fetchall()
    for session_id, summary in rows:
        memory.labels.relabel_session(session_id, memory.policy.privacy.categorize(summary))
    return len(rows)


def _derived(memory: Memory) -> int:
    """Daily summaries and digests: the lexicon's over their own text (their sources' were
    added as the pairs and summaries above changed)."""
    privacy = memory.policy.privacy
    count = 0
    for table, id_column, text in _DERIVED:
        rows = memory.db.execute(
            f"SELECT {id_column}, {text}, categories, expire_at, updated_at FROM {table}"
        ).fetchall()
        for row_id, body, raw, expire_at, updated_at in rows:
            old = json.loads(raw)
            cats = merge(old, privacy.categorize(body))
            if cats == old:
                continue
            cap = privacy.expire_of(cats, parse_iso(updated_at))
            ends = [e for e in (iso(cap) if cap else None, expire_at) if e]
            memory.db.execute(
                f"UPDATE {table} SET categories = ?, sensitive = max(sensitive, ?),"
                f" expire_at = ? WHERE {id_column} = ?",
                [jsonx.dumps(cats), int(privacy.any_sensitive(cats)), min(ends), row_id],
            )
            count += 1
            if table == "daily_summaries":
                _digests_of(memory, row_id, cats)
    return count


def _digests_of(memory: Memory, summary_id: str, added: list[str]) -> None:
    rows = memory.db.execute(
        "SELECT digest_id, categories FROM weekly_digests WHERE EXISTS (SELECT 1 FROM"
        " json_each(weekly_digests.source_summary_ids) WHERE value = ?)",
        [summary_id],
    ).fetchall()
    privacy = memory.policy.privacy
    for digest_id, raw in rows:
        cats = merge(json.loads(raw), added)
        memory.db.execute(
            "UPDATE weekly_digests SET categories = ?, sensitive = max(sensitive, ?)"
            " WHERE digest_id = ?",
            [jsonx.dumps(cats), int(privacy.any_sensitive(cats)), digest_id],
        )


def _items(memory: Memory) -> int:
    rows = memory.db.execute("SELECT item_id, key, value FROM profile_items").fetchall()
    for item_id, key, value in rows:
        memory.profile.label_item(item_id, key, json.loads(value), None)
    return len(rows)
