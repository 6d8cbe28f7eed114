"""The local memory: tiers, snapshot builder, update apply, sessions, promotion, privacy.
The face: what other packages may use is `__all__`, imported from here (`from cache import
CacheStore`), never from a submodule; tests/test_faces.py holds it. The names load on first use
(PEP 562), so importing the package costs nothing and the CLI's lazy imports stay lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a_common.faces import Face, lazy_face

if TYPE_CHECKING:
    from cache.focus import focused as focused
    from cache.lexicon import (
        Lexicon as Lexicon,
    )
    from cache.lexicon import (
        LexiconError as LexiconError,
    )
    from cache.lexicon import (
        lexicon as extended_lexicon,
    )
    from cache.lexicon import (
        load_lexicon_file as load_lexicon_file,
    )
    from cache.lexicon import (
        shipped as shipped,
    )
    from cache.listing import pairs as list_pairs
    from cache.listing import sessions as list_sessions
    from cache.memory import (
        SYNC_REFUSED as SYNC_REFUSED,
    )
    from cache.memory import (
        Memory as Memory,
    )
    from cache.memory import (
        MemoryPolicy as MemoryPolicy,
    )
    from cache.migrations import MIGRATIONS as MIGRATIONS
    from cache.model import (
        CacheView as CacheView,
    )
    from cache.model import (
        CandidateIn as CandidateIn,
    )
    from cache.model import (
        DailySummary as DailySummary,
    )
    from cache.model import (
        PairView as PairView,
    )
    from cache.model import (
        ProfileView as ProfileView,
    )
    from cache.model import (
        PromotionPolicy as PromotionPolicy,
    )
    from cache.model import (
        SyncPosition as SyncPosition,
    )
    from cache.privacy import CategoryPolicy as CategoryPolicy
    from cache.privacy import PrivacyPolicy as PrivacyPolicy
    from cache.profile import value_key as value_key
    from cache.promotion import (
        StepOutcome as StepOutcome,
    )
    from cache.promotion import (
        observed_candidates as observed_candidates,
    )
    from cache.relabel import (
        FINGERPRINT_KEY as FINGERPRINT_KEY,
    )
    from cache.relabel import (
        relabel_if_changed as relabel_if_changed,
    )
    from cache.relevance import query as query
    from cache.revision import state_of as state_of
    from cache.snapshot import build_snapshot as build_snapshot
    from cache.store import CacheStore as CacheStore
    from cache.update import UpdateInput as UpdateInput
    from cache.update import plan_update as plan_update

__all__ = [
    "FINGERPRINT_KEY",
    "MIGRATIONS",
    "SYNC_REFUSED",
    "CacheStore",
    "CacheView",
    "CandidateIn",
    "CategoryPolicy",
    "DailySummary",
    "Lexicon",
    "LexiconError",
    "Memory",
    "MemoryPolicy",
    "PairView",
    "PrivacyPolicy",
    "ProfileView",
    "PromotionPolicy",
    "StepOutcome",
    "SyncPosition",
    "UpdateInput",
    "build_snapshot",
    "extended_lexicon",
    "focused",
    "list_pairs",
    "list_sessions",
    "load_lexicon_file",
    "observed_candidates",
    "plan_update",
    "query",
    "relabel_if_changed",
    "shipped",
    "state_of",
    "value_key",
]

# name -> (submodule, attribute)
_FACE: Face = {
    "CacheStore": ("cache.store", "CacheStore"),
    "CacheView": ("cache.model", "CacheView"),
    "CandidateIn": ("cache.model", "CandidateIn"),
    "CategoryPolicy": ("cache.privacy", "CategoryPolicy"),
    "DailySummary": ("cache.model", "DailySummary"),
    "FINGERPRINT_KEY": ("cache.relabel", "FINGERPRINT_KEY"),
    "Lexicon": ("cache.lexicon", "Lexicon"),
    "LexiconError": ("cache.lexicon", "LexiconError"),
    "MIGRATIONS": ("cache.migrations", "MIGRATIONS"),
    "Memory": ("cache.memory", "Memory"),
    "MemoryPolicy": ("cache.memory", "MemoryPolicy"),
    "PairView": ("cache.model", "PairView"),
    "PrivacyPolicy": ("cache.privacy", "PrivacyPolicy"),
    "ProfileView": ("cache.model", "ProfileView"),
    "PromotionPolicy": ("cache.model", "PromotionPolicy"),
    "SYNC_REFUSED": ("cache.memory", "SYNC_REFUSED"),
    "StepOutcome": ("cache.promotion", "StepOutcome"),
    "SyncPosition": ("cache.model", "SyncPosition"),
    "UpdateInput": ("cache.update", "UpdateInput"),
    "build_snapshot": ("cache.snapshot", "build_snapshot"),
    "extended_lexicon": ("cache.lexicon", "lexicon"),
    "focused": ("cache.focus", "focused"),
    "list_pairs": ("cache.listing", "pairs"),
    "list_sessions": ("cache.listing", "sessions"),
    "load_lexicon_file": ("cache.lexicon", "load_lexicon_file"),
    "observed_candidates": ("cache.promotion", "observed_candidates"),
    "plan_update": ("cache.update", "plan_update"),
    "query": ("cache.relevance", "query"),
    "relabel_if_changed": ("cache.relabel", "relabel_if_changed"),
    "shipped": ("cache.lexicon", "shipped"),
    "state_of": ("cache.revision", "state_of"),
    "value_key": ("cache.profile", "value_key"),
}

if not TYPE_CHECKING:  # a type checker sees the imports above and no catch-all
    __getattr__, __dir__ = lazy_face(globals(), _FACE)
