"""The privacy policy (SPEC §5.5), pure: per category, how long to keep and whether to share.

`store`: `never` (not written), `session` (gone when its session ends), `days:N` (expires N days
after its latest evidence). Sensitive categories default to `days:30`, unshared, and are capped
at 30 days whatever the config or the cloud says.

One rule for every tier (pairs, summaries, digests, profile items): a text carries a list of
categories (`categorize`: the lexicon's, plus what the cloud and its sources said). It enters a
snapshot only when each of its categories is `visible`, and a sync write only when each is
`syncable`:
- a category whose config entry says `share = false` never leaves the device;
- a sensitive category leaves it only while consent for it is held (its default `share: false`
  is what consent lifts; an explicit `share = false` no consent lifts);
- any other category follows its `share` (default true).
Consent is read through one seam: the `consented` set the caller passes (today the policy's own,
from config; the consent register replaces that source).

Category names compare case-insensitively (SPEC §5.5): the policy lower-cases its own names and
every name it is asked about, NFKC-folded (`ｈｅａｌｔｈ` is `health`); the cloud's are lower-cased
where they enter (`cloud_client.models`) and folded wherever a list is merged (`labels.merge`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cache.lexicon import Lexicon, fold_name, shipped

SENSITIVE_DEFAULT = ("health", "vital", "home_layout", "contact")
SENSITIVE_MAX_DAYS = 30
STORE_PATTERN = r"^(never|session|forever|days:[1-9][0-9]{0,4})$"


@dataclass(frozen=True)
class CategoryPolicy:
    store: str = "forever"
    share: bool = True


def category_name(category: str | None) -> str | None:
    """The form a category is kept and compared in: NFKC, case-folded, stripped (a full-width
    `ｈｅａｌｔｈ` from the cloud is `health`)."""
    return fold_name(category) if category is not None else None


@dataclass(frozen=True)
class PrivacyPolicy:
    categories: Mapping[str, CategoryPolicy] = field(default_factory=dict)
    sensitive: frozenset[str] = frozenset(SENSITIVE_DEFAULT)
    consented: frozenset[str] = frozenset()
    lexicon: Lexicon = field(default_factory=shipped)

    def __post_init__(self) -> None:
        fold = object.__setattr__  # frozen: normalised once, here
        fold(self, "categories", {fold_name(k): v for k, v in self.categories.items()})
        fold(self, "sensitive", frozenset(fold_name(c) for c in self.sensitive))
        fold(self, "consented", frozenset(fold_name(c) for c in self.consented))

    def of(self, category: str | None) -> CategoryPolicy:
        name = category_name(category)
        if name is not None and name in self.categories:
            return self.categories[name]
        if name in self.sensitive:
            return CategoryPolicy("days:30", share=False)
        return CategoryPolicy()

    def is_sensitive(self, category: str | None) -> bool:
        return category_name(category) in self.sensitive

    def writable(self, category: str | None) -> bool:
        return self.of(category).store != "never"

    def shared(self, category: str | None) -> bool:
        return self.of(category).share

    def expire_at(self, category: str | None, latest: datetime) -> datetime | None:
        """When a text of `category` last evidenced at `latest` expires; sensitive ones after
        30 days at most, whatever the store rule says."""
        match = re.match(r"^days:(\d+)$", self.of(category).store)
        days = int(match.group(1)) if match else None
        if self.is_sensitive(category):
            days = min(days or SENSITIVE_MAX_DAYS, SENSITIVE_MAX_DAYS)
        return latest + timedelta(days=days) if days is not None else None

    def expire_of(self, categories: Iterable[str], latest: datetime) -> datetime | None:
        """The earliest expiry any of `categories` asks for."""
        ends = [e for c in categories if (e := self.expire_at(c, latest)) is not None]
        return min(ends) if ends else None

    # --- every tier: lists of categories ----------------------------------------------------
    def categorize(self, *texts: str) -> list[str]:
        return self.lexicon.categories(*texts)

    def any_sensitive(self, categories: Iterable[str]) -> bool:
        return any(self.is_sensitive(c) for c in categories)

    def never_stored(self, categories: Iterable[str]) -> bool:
        return any(not self.writable(c) for c in categories)

    def session_scoped(self) -> list[str]:
        return sorted(c for c, p in self.categories.items() if p.store == "session")

    def visible(self, category: str | None, consented: frozenset[str]) -> bool:
        """May a text of this category be in a snapshot, under `consented`?"""
        name = category_name(category)
        explicit = self.categories.get(name) if name is not None else None
        if explicit is not None and not explicit.share:
            return False
        if name in self.sensitive:
            return name in consented
        return self.of(name).share

    def syncable(self, category: str | None, consented: frozenset[str]) -> bool:
        """May a sync write of this category go to the cloud?"""
        return self.shared(category) and self.visible(category, consented)

    def known(self) -> list[str]:
        """Every category the policy says something about (others: kept, shared)."""
        return sorted(set(self.categories) | self.sensitive)

    def blocked(self, consented: frozenset[str]) -> list[str]:
        """The categories whose texts stay out of a snapshot under `consented`."""
        return [c for c in self.known() if not self.visible(c, consented)]

    def withheld(self, categories: Iterable[str], consented: frozenset[str]) -> bool:
        """A text of these categories must not go in a sync write."""
        return any(not self.syncable(c, consented) for c in categories)
