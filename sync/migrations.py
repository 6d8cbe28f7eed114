"""Every migration of the outbox's tables, in the order the package wrote them; the state DB's
order across packages is `edge/store/schema.py`'s."""

from __future__ import annotations

from a2a_common.sqlite import Migration
from sync import outbox

MIGRATIONS: list[Migration] = [
    *outbox.MIGRATIONS,
    *outbox.MIGRATIONS_2,
    *outbox.MIGRATIONS_3,
    *outbox.MIGRATIONS_4,
]
