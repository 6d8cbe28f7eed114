"""The category lexicon: Korean without a tokenizer, short terms as whole words, extension."""

from __future__ import annotations

from pathlib import Path

import pytest

from cache.lexicon import LexiconError, lexicon, load_lexicon_file, parse_lexicon, shipped


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("나 고혈압이 있어서 약 먹고 있어", ["health"]),
        ("사용자는 고혈압 약을 복용 중", ["health"]),
        ("혈압약 복용을 두 번 언급", ["health"]),
        ("약이랑 물 좀 가져다줘", ["health"]),  # 약 + particle 이랑
        ("I take my Medication at 9", ["health"]),  # case-folded
        ("우리 집 현관 비밀번호는 1234야", ["home_layout"]),
        ("엄마 전화번호 알려줘", ["contact"]),
        ("수축기 142 이완기 95", ["vital"]),
        ("BLOOD PRESSURE is high and the door code is 4321", ["health", "home_layout"]),
    ],
)
def test_terms_are_found(text: str, expected: list[str]) -> None:
    assert shipped().categories(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "내일 약속 있어",  # 약 inside 약속: not a word
        "약간 추워",  # 약간: slightly
        "에너지 절약 모드로 해줘",  # 절약: 약 does not start the word
        "거실 청정해줘",
        "pillow on the sofa",  # pill inside pillow
    ],
)
def test_short_terms_do_not_match_inside_other_words(text: str) -> None:
    assert shipped().categories(text) == []


def test_nfc_and_nfd_match_alike() -> None:
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "고혈압")
    assert shipped().categories(f"나 {decomposed} 있어") == ["health"]


def test_a_config_file_extends_the_shipped_lexicon(tmp_path: Path) -> None:
    toml = tmp_path / "extra.toml"
    toml.write_text(
        'health = ["통풍"]\nhobby = [{term = "낚시", match = "word"}]\n', encoding="utf-8"
    )
    lex = lexicon(str(toml))
    assert lex.categories("통풍 때문에 발이 아파") == ["health"]
    assert lex.categories("주말에 낚시를 가") == ["hobby"]
    assert lex.categories("낚시터") == []  # word match
    assert lex.categories("고혈압") == ["health"]  # the shipped terms stay
    js = tmp_path / "extra.json"
    js.write_text('{"contact": ["카톡 아이디"]}', encoding="utf-8")
    assert lexicon(str(js)).categories("내 카톡 아이디는") == ["contact"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must be a table"),
        ('{"health": "혈압"}', "must be a list"),
        ('{"health": [""]}', "non-empty string"),
        ('{"health": [{"term": "약", "match": "prefix"}]}', "substring or word"),
        ('{"health": [{"word": "약"}]}', "a term is a string"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_lexicon_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LexiconError, match=message):
        load_lexicon_file(str(path))


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LexiconError, match="cannot read"):
        load_lexicon_file(str(tmp_path / "nope.json"))
    assert parse_lexicon({"_doc": "comment only"}).terms == {}
