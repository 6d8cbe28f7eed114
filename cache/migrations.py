"""Every migration of the cache's tables, in the order the package wrote them; the state DB's
order across packages is `edge/store/schema.py`'s."""

from __future__ import annotations

from a2a_common.sqlite import Migration
from cache import schema

MIGRATIONS: list[Migration] = [
    *schema.MIGRATIONS,  # cache_0001, cache_0002
    *schema.MIGRATIONS_3,
    *schema.MIGRATIONS_4,
    *schema.MIGRATIONS_5,
    *schema.MIGRATIONS_6,
    *schema.MIGRATIONS_7,
    *schema.MIGRATIONS_8,
    *schema.MIGRATIONS_9,
    *schema.MIGRATIONS_10,
]
