"""Settings turned into the cache's policies (used at start and on SIGHUP)."""

from __future__ import annotations

from cache import (
    CategoryPolicy,
    Lexicon,
    LexiconError,
    MemoryPolicy,
    PrivacyPolicy,
    PromotionPolicy,
    extended_lexicon,
)
from edge.config.errors import ConfigError
from edge.config.settings import Settings


def _lexicon(settings: Settings) -> Lexicon:
    try:
        return extended_lexicon(settings.privacy.lexicon_file)
    except LexiconError as exc:  # changed since the settings were checked
        raise ConfigError("privacy.lexicon_file", str(exc)) from None


def privacy_policy(settings: Settings) -> PrivacyPolicy:
    return PrivacyPolicy(
        categories={
            name: CategoryPolicy(p.store, p.share)
            for name, p in settings.privacy.categories.items()
        },
        sensitive=frozenset(settings.privacy.sensitive_categories),
        consented=frozenset(settings.privacy.consented_categories),
        lexicon=_lexicon(settings),
    )


def memory_policy(settings: Settings) -> MemoryPolicy:
    mem = settings.memory
    return MemoryPolicy(
        snapshot_budget_bytes=mem.snapshot_budget_bytes,
        recent_pairs=mem.recent_pairs,
        standing_items=mem.snapshot_standing_items,
        session_idle_s=mem.session_idle_s,
        timezone=mem.timezone,
        promotion=PromotionPolicy(**mem.promotion.model_dump()),
        retention_days=mem.retention_days,
        privacy=privacy_policy(settings),
    )
