from __future__ import annotations

from pathlib import Path

import pytest

from cache.privacy import CategoryPolicy
from edge.config.errors import ConfigError
from edge.config.policies import memory_policy, privacy_policy
from edge.config.settings import load_settings


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


def test_the_lexicon_file_extends_the_policy_and_a_bad_one_names_its_key(
    tmp_path: Path,
) -> None:
    extra = tmp_path / "lexicon.json"
    extra.write_text('{"hobby": [{"term": "낚시", "match": "word"}]}', encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(f'[privacy]\nlexicon_file = "{extra}"\n', encoding="utf-8")
    privacy = privacy_policy(load_settings(config, environ={}))
    assert privacy.categorize("주말에 낚시를 가") == ["hobby"]
    assert privacy.categorize("고혈압") == ["health"]  # the shipped terms stay
    extra.write_text('{"hobby": "낚시"}', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config, environ={})
    assert info.value.key == "privacy.lexicon_file" and "must be a list" in str(info.value)
    missing = {"A2A_EDGE_PRIVACY__LEXICON_FILE": str(tmp_path / "nope.json")}
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(None, environ=missing)
