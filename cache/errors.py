from __future__ import annotations

from a2a_common.errors import EdgeError


class CacheError(EdgeError):
    """The memory cache could not read or write."""
