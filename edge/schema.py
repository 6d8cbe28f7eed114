"""The order of every package's migrations in the one state DB. Append only."""

from __future__ import annotations

from a2a_common.sqlite import Migration
from cache.schema import MIGRATIONS as CACHE
from edge.outbound import MIGRATIONS as EDGE

MIGRATIONS: list[Migration] = [*EDGE, *CACHE]
