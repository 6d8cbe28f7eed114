from __future__ import annotations

from pathlib import Path

from cache.privacy import CategoryPolicy
from edge.config import load_settings
from edge.policies import memory_policy, privacy_policy


def test_the_memory_policy_holds_the_privacy_policy_of_the_same_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[memory]\nsession_idle_s = 600\n"
        '[privacy]\nconsented_categories = ["health"]\nsensitive_categories = ["health"]\n'
        '[privacy.categories.mood]\nstore = "session"\nshare = false\n',
        encoding="utf-8",
    )
    settings = load_settings(config, environ={})
    privacy = privacy_policy(settings)
    assert privacy.categories == {"mood": CategoryPolicy("session", share=False)}
    assert privacy.sensitive == privacy.consented == frozenset({"health"})
    policy = memory_policy(settings)
    assert policy.privacy == privacy
    assert policy.session_idle_s == 600
