"""The order of every package's migrations in the one state DB.

Append only: a new migration goes at the end of this list, whichever package it belongs to,
because `PRAGMA user_version` counts positions in it. A package's migrations come from its
face (`cache.MIGRATIONS`, ...: its `migrations.py`), picked here by name.
"""

from __future__ import annotations

from a2a_common.sqlite import Migration
from cache import MIGRATIONS as CACHE_MIGRATIONS
from edge.store import consent, inbox, outbound, reports_owed
from sync import MIGRATIONS as SYNC_MIGRATIONS
from taskmanager import MIGRATIONS as TASKMANAGER_MIGRATIONS

_PACKAGES = {m.name: m for m in [*CACHE_MIGRATIONS, *SYNC_MIGRATIONS, *TASKMANAGER_MIGRATIONS]}


def _of(*names: str) -> list[Migration]:
    """The packages' migrations by name (each package's face lists its own, in its order)."""
    return [_PACKAGES[name] for name in names]


MIGRATIONS: list[Migration] = [
    *outbound.MIGRATIONS,  # 1 edge_0001_mqtt_outbox_inbox
    *_of("cache_0001_pairs_sessions_state", "cache_0002_tiers_profile_provenance"),  # 2, 3
    *_of("sync_0001_outbox"),  # 4
    *_of("taskmanager_0001_workflows_trace"),  # 5
    *_of("sync_0002_dead_letters_meta"),  # 6
    *_of("cache_0003_memory_audit"),  # 7
    *_of("taskmanager_0002_workflows_ended_index"),  # 8
    *outbound.MIGRATIONS_2,  # 9 edge_0002_inbox_seen_at_index
    *inbox.MIGRATIONS,  # 10 edge_0003_inbox_dead_letters
    *inbox.MIGRATIONS_2,  # 11 edge_0004_inbox_seen_answers
    *_of("cache_0004_text_categories"),  # 12
    *consent.MIGRATIONS,  # 13 edge_0005_consent_register
    *_of("cache_0005_memory_windows"),  # 14
    *_of("taskmanager_0003_cancel_confirm"),  # 15
    *inbox.MIGRATIONS_3,  # 16 edge_0006_inbox_seen_without_rowid
    *outbound.MIGRATIONS_3,  # 17 edge_0007_mqtt_outbox_plain_ids
    *_of("taskmanager_0004_trace_plain_ids"),  # 18
    *_of("cache_0006_device_state_without_rowid"),  # 19
    *_of("sync_0003_outbox_without_rowid"),  # 20
    *reports_owed.MIGRATIONS,  # 21 edge_0008_reports_owed
    *_of("taskmanager_0005_agents"),  # 22
    *_of("cache_0007_people"),  # 23
    *consent.MIGRATIONS_2,  # 24 edge_0009_consent_per_person
    *_of("cache_0008_unread_indexes"),  # 25
    *reports_owed.MIGRATIONS_2,  # 26 edge_0010_reports_owed_inline
    *inbox.MIGRATIONS_4,  # 27 edge_0011_inbox_seen_inline
    *_of("sync_0004_outbox_inline"),  # 28
    *_of("cache_0009_pending_unindexed"),  # 29
    *_of("cache_0010_sessions_entered"),  # 30
]
