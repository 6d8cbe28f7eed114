"""The category lexicon: Korean without a tokenizer, short terms as whole words, extension."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cache.lexicon import (
    JOSA,
    Forms,
    LexiconError,
    lexicon,
    load_lexicon_file,
    parse_lexicon,
    shipped,
)
from tests.cache.evasions import CF, SEPARATORS, evaded_term, full_width, terms_of


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
        ("수축기 142 이완기 95", ["health", "vital"]),  # a reading is about health too
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
        ('{"health": [{"term": "약", "match": "prefix"}]}', "match must be one of"),
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


EVASIONS = [
    "ｍｙ ｂｌｏｏｄ ｐｒｅｓｓｕｒｅ",
    "혈\u200b압",
    "혈 압 재줘",
    "혈\u00ad압",
    "blood\u200bpressure",
    "HeAlTh Blood-Pressure",
    "Blood  Pressure",
    "BLOOD\tPRESSURE",
    "bloodpressure",
    "\ufeff고혈 압 있어",
    "p i l l s 먹었어",
    "약\u200b을 먹어",
]


@pytest.mark.parametrize("text", EVASIONS)
def test_evasions_of_a_health_term_are_found(text: str) -> None:
    assert "health" in shipped().categories(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("비번 알려줘", "home_layout"),
        ("현관 비번은 1234", "home_layout"),
        ("my meds are in the kitchen", "health"),
        ("my cell number is 555", "contact"),
        ("심장이 두근거려", "health"),
        ("도어록 번호 바꿨어", "home_layout"),
        ("핸드폰 번호는 010-1234-5678", "contact"),
        ("e-mail me", "contact"),
        ("e mail me", "contact"),
    ],
)
def test_everyday_terms_are_found(text: str, expected: str) -> None:
    assert expected in shipped().categories(text)


@pytest.mark.parametrize(
    "text",
    [
        "약\u200b속 있어",  # a format character does not make 약속 two words
        "ＰＩＬＬＯＷ on the sofa",
        "약간\u00ad추워",
        "지금 고기 구워",  # 금고 (safe) across two words is not a term
        "check the mail",  # email across two words is not a term
        "예약 드릴까요",
        "주사위 게임 하자",
        "아파트 관리비",
    ],
)
def test_folding_does_not_make_everyday_words_sensitive(text: str) -> None:
    assert shipped().categories(text) == []


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_evasion_of_every_shipped_term_is_found(data: st.DataObject) -> None:
    category = data.draw(st.sampled_from(sorted(shipped().terms)))
    text = data.draw(evaded_term(category))
    assert category in shipped().categories(f"오늘 {text} 얘기"), repr(text)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_word_term_inside_a_longer_word_stays_unmatched(data: st.DataObject) -> None:
    term = data.draw(st.sampled_from([t for c in shipped().terms for t in terms_of(c, "word")]))
    korean = "\uac00" <= term.text[0] <= "\ud7a3"
    longer = term.text + data.draw(st.sampled_from(["속", "간", "탕"] if korean else ["ow", "er"]))
    text = "".join(c.upper() if data.draw(st.booleans()) else c for c in longer)
    if data.draw(st.booleans()):
        text = full_width(text)
    at = data.draw(st.integers(0, len(text)))
    text = text[:at] + data.draw(st.sampled_from(CF)) + text[at:]
    assert not term.found_in(Forms.of(f"오늘 {text} 얘기")), repr(text)


def _one_term_at_a_time(*texts: str) -> list[str]:
    """`Term.found_in`, the reference rule, over every term and every text (each category's
    near misses masked first: what its terms see)."""
    lex = shipped()
    return sorted(
        n
        for n, ts in lex.terms.items()
        if any(t.found_in(lex.masked(n, text)) for t in ts for text in texts if text)
    )


_PIECES = [t.text for ts in shipped().terms.values() for t in ts] + [
    *JOSA,
    *SEPARATORS,
    *CF,
    "약",
    "속",
    "간",
    "고",
    "금",
    "pill",
    "ow",
    "Ｐ",
    "7",
]


@settings(max_examples=500, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), max_size=3))
def test_the_compiled_lexicon_finds_what_each_term_finds(texts: list[str]) -> None:
    """All terms at once (one regular expression per category and form, the texts joined)
    find exactly what the terms find one at a time, one text at a time."""
    assert shipped().categories(*texts) == _one_term_at_a_time(*texts)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_one_search_that_rules_texts_out_never_hides_a_term(data: st.DataObject) -> None:
    """`Lexicon.categories` skips a text whose compact form holds no key: it finds exactly
    what testing every term on every form finds, evasions, near misses and noise alike."""
    category = data.draw(st.sampled_from(sorted(shipped().terms)))
    noise = st.text(st.sampled_from([*"가나다 약속간-. pilowPIL", *CF]), max_size=12)
    texts = [
        data.draw(st.one_of(evaded_term(category), noise)) + data.draw(noise)
        for _ in range(data.draw(st.integers(1, 3)))
    ]
    assert shipped().categories(*texts) == _one_term_at_a_time(*texts), texts


def test_a_full_width_cloud_category_is_the_plain_one() -> None:
    from cache.labels import merge
    from cache.privacy import PrivacyPolicy, category_name

    assert category_name(" ｈｅａｌｔｈ ") == "health"
    assert merge(["ＨＥＡＬＴＨ"], ["health"]) == ["health"]
    assert PrivacyPolicy().is_sensitive("ｈｅａｌｔｈ")
    assert not PrivacyPolicy().visible("ｈｅａｌｔｈ", frozenset())
    assert parse_lexicon({"Ｈｏｂｂｙ": ["낚시"]}).categories("낚시 가자") == ["hobby"]
