"""The privacy policy (SPEC §5.5), pure: per category, how long to keep and whether to share.

`store`: `never` (not written), `session` (gone when its session ends), `days:N` (expires N days
after its latest evidence). `share: false` keeps the item off the cloud's sync. Sensitive
categories default to `days:30`, unshared, and enter a snapshot only with consent.

Category names compare case-insensitively (SPEC §5.5): the policy lower-cases its own names and
every name it is asked about; the cloud's are lower-cased where they enter (`cloud_client.models`).
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


def category_name(category: str | None) -> str | None:
    """The form a category is kept and compared in."""
    return category.strip().lower() if category is not None else None


@dataclass(frozen=True)
class PrivacyPolicy:
    categories: Mapping[str, CategoryPolicy] = field(default_factory=dict)
    sensitive: frozenset[str] = frozenset(SENSITIVE_DEFAULT)
    consented: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        fold = object.__setattr__  # frozen: normalised once, here
        fold(self, "categories", {k.strip().lower(): v for k, v in self.categories.items()})
        fold(self, "sensitive", frozenset(c.strip().lower() for c in self.sensitive))
        fold(self, "consented", frozenset(c.strip().lower() for c in self.consented))

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
        match = re.match(r"^days:(\d+)$", self.of(category).store)
        return latest + timedelta(days=int(match.group(1))) if match else None
