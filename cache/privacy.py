"""The privacy policy (SPEC §5.5), pure: per category, how long to keep and whether to share.

`store`: `never` (not written), `session` (gone when its session ends), `days:N` (expires N days
after its latest evidence). `share: false` keeps the item off the cloud's sync. Sensitive
categories default to `days:30`, unshared, and enter a snapshot only with consent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

SENSITIVE_DEFAULT = ("health", "vital", "home_layout", "contact")
STORE_PATTERN = r"^(never|session|forever|days:[1-9][0-9]{0,4})$"


@dataclass(frozen=True)
class CategoryPolicy:
    store: str = "forever"
    share: bool = True


@dataclass(frozen=True)
class PrivacyPolicy:
    categories: Mapping[str, CategoryPolicy] = field(default_factory=dict)
    sensitive: frozenset[str] = frozenset(SENSITIVE_DEFAULT)
    consented: frozenset[str] = frozenset()

    def of(self, category: str | None) -> CategoryPolicy:
        if category is not None and category in self.categories:
            return self.categories[category]
        if category in self.sensitive:
            return CategoryPolicy("days:30", share=False)
        return CategoryPolicy()

    def writable(self, category: str | None) -> bool:
        return self.of(category).store != "never"

    def shared(self, category: str | None) -> bool:
        return self.of(category).share

    def expire_at(self, category: str | None, latest: datetime) -> datetime | None:
        match = re.match(r"^days:(\d+)$", self.of(category).store)
        return latest + timedelta(days=int(match.group(1))) if match else None
