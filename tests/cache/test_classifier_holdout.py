"""How the classifier generalizes (issue 33): its floor on the held-out set
(tests/fixtures/privacy_holdout.jsonl, written blind after the lexicon was tuned on the
evaluation set; see privacy_eval.md), and the productive rules that took it there — spoken
conjugations, near misses given as patterns, compounds a near miss must not eat.

`python -m bench.classifier --set tests/fixtures/privacy_holdout.jsonl` prints the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.classifier import CATEGORIES, load_cases, misses, score
from cache.korean import surface_stems
from cache.lexicon import LexiconError, parse_lexicon, shipped

HOLDOUT = Path(__file__).resolve().parents[1] / "fixtures" / "privacy_holdout.jsonl"
# Measured at 1.000 recall and 0.976-1.000 precision after the change (0.675-0.909 recall
# before); the floor leaves a text or two of room per category for a later trade-off.
RECALL, PRECISION = 0.95, 0.95


@pytest.fixture(scope="module")
def labelled() -> tuple[list[dict[str, object]], list[list[str]]]:
    cases = load_cases(HOLDOUT)
    assert len(cases) >= 200
    lexicon = shipped()
    return cases, [lexicon.categories(str(c["text"])) for c in cases]


@pytest.mark.parametrize("category", CATEGORIES)
def test_the_held_out_set_holds_the_floor(
    labelled: tuple[list[dict[str, object]], list[list[str]]], category: str
) -> None:
    cases, labels = labelled
    assert sum(category in c["categories"] for c in cases) >= 35, category  # type: ignore[operator]
    result = score(cases, labels)[category]
    missed, extra = misses(cases, labels, category)
    assert result.recall >= RECALL, (result, missed)
    assert result.precision >= PRECISION, (result, extra)


def test_the_held_out_near_misses_stay_neutral(
    labelled: tuple[list[dict[str, object]], list[list[str]]],
) -> None:
    cases, labels = labelled
    near = [
        (c["text"], found)
        for c, found in zip(cases, labels, strict=True)
        if str(c.get("note", "")).startswith("near miss")
    ]
    assert len(near) >= 30
    flagged = [(text, found) for text, found in near if found]
    assert len(flagged) <= 2, flagged


@pytest.mark.parametrize(
    ("dictionary_form", "spoken"),
    [("아프다", "아퍼"), ("아프다", "아펐"), ("어지럽다", "어지러버"), ("메스껍다", "메스꺼버")],
)
def test_spoken_conjugations_are_stems(dictionary_form: str, spoken: str) -> None:
    assert spoken in surface_stems(dictionary_form)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("배가 살살 아퍼", ["health"]),  # spoken 아파
        ("어지러버서 못 일어나겠다", ["health"]),  # Gyeongsang 어지러워
        ("목이 따끔거리고 코가 꽉 막혔어", ["health"]),  # a body part with a symptom
        ("변비약 좀 사다 줘", ["health"]),  # 비약 (a leap) is a near miss only as a word
        ("약 두 알 먹어", ["health"]),  # 약 before a count of pills is medicine
        ("약 10분 걸려", []),  # 약 before a quantity is "about"
        ("약 한 시간 뒤에 출발해", []),
        ("답답해 왜 못 알아들어", []),  # frustration, no body part
        ("커튼으로 가려버려", []),  # 가리다 + 버리다, not 가렵다's 가려버
        ("맥 재부팅 해줘", []),  # a Mac, not a pulse taken
        ("혈당 체크할 시간 알려줘", ["health", "vital"]),  # a reading's word
        ("혈압약 챙겨줘", ["health"]),  # a medicine, no reading
        ("나 키 172였나", ["vital"]),
        ("영일공 사사 팔팔구구", ["contact"]),  # spoken digits, one group cut short
        ("010-12 34-5678", ["contact"]),  # split anywhere by ASR
        ("버스 번호 알려줘", []),
        ("금요일 밤엔 할아버지만 집에 계셔", ["home_layout"]),
        ("놀이터에 아무도 없어", []),
    ],
)
def test_productive_rules(text: str, expected: list[str]) -> None:
    assert shipped().categories(text) == expected


def test_a_near_miss_pattern_masks_only_its_span() -> None:
    lexicon = parse_lexicon(
        {
            "health": [
                {"term": "약", "match": "word"},
                {"term": "(?<![가-힣])약 ?\\d+ ?분", "match": "not_regex"},
            ]
        }
    )
    assert lexicon.categories("약 5분 뒤에") == []
    assert lexicon.categories("약 5분 뒤에 약 먹어") == ["health"]
    with pytest.raises(LexiconError, match="not a regular expression"):
        parse_lexicon({"health": [{"term": "약(", "match": "not_regex"}]})
