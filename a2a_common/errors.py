"""The root of every error a2a-edge raises on purpose."""

from __future__ import annotations


class EdgeError(Exception):
    """Base class; each package derives its own (CacheError, CloudError, ...)."""
