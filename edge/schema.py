"""The order of every package's migrations in the one state DB.

Append only: a new migration goes at the end of this list, whichever package it belongs to,
because `PRAGMA user_version` counts positions in it.
"""

from __future__ import annotations

from a2a_common.sqlite import Migration
from cache import schema as cache_schema
from edge import consent, inbox, outbound, reports_owed
from sync import outbox
from taskmanager import store as taskmanager_store
from taskmanager import watch as taskmanager_watch

MIGRATIONS: list[Migration] = [
    *outbound.MIGRATIONS,  # 1 edge_0001_mqtt_outbox_inbox
    *cache_schema.MIGRATIONS,  # 2 cache_0001, 3 cache_0002
    *outbox.MIGRATIONS,  # 4 sync_0001_outbox
    *taskmanager_store.MIGRATIONS,  # 5 taskmanager_0001_workflows_trace
    *outbox.MIGRATIONS_2,  # 6 sync_0002_dead_letters_meta
    *cache_schema.MIGRATIONS_3,  # 7 cache_0003_memory_audit
    *taskmanager_store.MIGRATIONS_2,  # 8 taskmanager_0002_workflows_ended_index
    *outbound.MIGRATIONS_2,  # 9 edge_0002_inbox_seen_at_index
    *inbox.MIGRATIONS,  # 10 edge_0003_inbox_dead_letters
    *inbox.MIGRATIONS_2,  # 11 edge_0004_inbox_seen_answers
    *cache_schema.MIGRATIONS_4,  # 12 cache_0004_text_categories
    *consent.MIGRATIONS,  # 13 edge_0005_consent_register
    *cache_schema.MIGRATIONS_5,  # 14 cache_0005_memory_windows
    *taskmanager_watch.MIGRATIONS,  # 15 taskmanager_0003_cancel_confirm
    *inbox.MIGRATIONS_3,  # 16 edge_0006_inbox_seen_without_rowid
    *outbound.MIGRATIONS_3,  # 17 edge_0007_mqtt_outbox_plain_ids
    *taskmanager_store.MIGRATIONS_3,  # 18 taskmanager_0004_trace_plain_ids
    *cache_schema.MIGRATIONS_6,  # 19 cache_0006_device_state_without_rowid
    *outbox.MIGRATIONS_3,  # 20 sync_0003_outbox_without_rowid
    *reports_owed.MIGRATIONS,  # 21 edge_0008_reports_owed
]
