"""Every migration of the task manager's tables, in the order the package wrote them; the state
DB's order across packages is `edge/store/schema.py`'s."""

from __future__ import annotations

from a2a_common.sqlite import Migration
from taskmanager import agents, store, watch

MIGRATIONS: list[Migration] = [
    *store.MIGRATIONS,  # taskmanager_0001
    *store.MIGRATIONS_2,  # taskmanager_0002
    *watch.MIGRATIONS,  # taskmanager_0003
    *store.MIGRATIONS_3,  # taskmanager_0004
    *agents.MIGRATIONS,  # taskmanager_0005
]
