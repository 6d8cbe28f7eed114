"""How many examples a property test runs. CI's (the default profile): a third of the count
the test was written with, at least 20. `A2A_HYPOTHESIS_PROFILE=ci-deep`: the whole count
(`A2A_HYPOTHESIS_PROFILE=ci-deep ./bootstrap.sh test tests/cache tests/edge/test_topics.py`)."""

from __future__ import annotations

import os

PROFILES = ("default", "ci-deep")


def profile() -> str:
    name = os.environ.get("A2A_HYPOTHESIS_PROFILE") or "default"
    if name not in PROFILES:
        raise ValueError(f"A2A_HYPOTHESIS_PROFILE={name!r}: one of {', '.join(PROFILES)}")
    return name


def examples(deep: int) -> int:
    """`deep` under ci-deep; else a third of it (at least 20, never more than `deep`)."""
    return deep if profile() == "ci-deep" else min(deep, max(20, deep // 3))
