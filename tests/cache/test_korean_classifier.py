"""The classifier reads Korean as Korean (issue 33 item 1, SPEC §5.5): compounds, inflected
predicates, disease names, contact details, home security — and not the near misses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cache.korean import surface_stems
from cache.lexicon import LexiconError, lexicon, parse_lexicon, shipped

REPRODUCED = ["엄마가 암에 걸렸어", "정신과 다녀왔어", "나 요즘 우울해", "아침약 챙겨줘"]


@pytest.mark.parametrize("text", REPRODUCED)
def test_the_four_reproduced_utterances_are_health(text: str) -> None:
    assert shipped().categories(text) == ["health"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("혈압약 먹었어?", "health"),  # 혈압 + 약
        ("저녁약 어디 뒀지", "health"),  # 저녁 + 약, a compound's tail
        ("할아버지 당뇨병 있으셔", "health"),
        ("유방암 검사 받았대", "health"),  # 유방 + 암
        ("암이래", "health"),  # 암 + the copula
        ("어제 너무 아팠어", "health"),  # 아프다, past
        ("머리아파", "health"),  # a noun run into the predicate
        ("아픈데 참고 있어", "health"),
        ("자꾸 어지러워", "health"),  # ㅂ-irregular
        ("손이 저려", "health"),  # ㅣ -> ㅕ
        ("우울했어", "health"),
        ("넘어져서 다쳤어", "health"),
        ("010 1234 5678로 전화해", "contact"),
        ("+82-10-1234-5678", "contact"),
        ("02)123-4567", "contact"),
        ("(555) 123-4567", "contact"),
        ("메일은 kim.ys@example.co.kr 이야", "contact"),
        ("서울시 강남구 역삼동 살아", "contact"),
        ("우리집 101동 1502호야", "contact"),
        ("현관 비번 0486*", "home_layout"),
        ("도어락 번호 바꿨어", "home_layout"),
        ("열쇠는 화분 밑에 숨겨놨어", "home_layout"),
        ("The key is under the mat", "home_layout"),
        ("I threw up twice", "health"),
        ("허리에 파스 붙였어", "health"),  # 파스 is a noun: a word, its particles, a tail
        ("근육파스 사와", "health"),
        ("재활 운동 했어", "health"),
        ("상처에 연고 발라줘", "health"),
        ("안과 다녀왔어", "health"),
    ],
)
def test_what_people_say_is_found(text: str, expected: str) -> None:
    assert expected in shipped().categories(text)


@pytest.mark.parametrize(
    "text",
    [
        "내일 약속 있어",  # 약속: a promise
        "약간 추워",  # 약간: slightly
        "나 오늘 정신없어",  # busy, not 정신과
        "암호화폐 시세 알려줘",  # a price question, not a password
        "애들이 병원놀이 하고 있어",  # a child's game
        "세줄요약 해줘",  # 요약 after a prefix is no compound of 약
        "아파트 관리비 얼마야",  # 아파 of 아프다 starts 아파트
        "아프리카 다큐 틀어줘",
        "배고파",
        "거실로 3분 뒤에 와",  # no address
        "주문번호 알려줘",
        "현관 불 좀 켜줘",
        "시간이 오래 걸렸어",
        "I'm sick of this song",
        "still there?",
        "파스타 먹고 싶어",  # pasta: 파스 matched anywhere until it became a noun
        "토마토 파스타 해줘",
        "파스텔 색 좋아",
        "재활용 쓰레기 버려줘",  # recycling, not 재활
        "연고지 팀이 이겼어",  # a home ground, not an ointment
        "안과 밖을 청소해",  # inside and out, not the eye clinic
        "캡스톤 디자인 발표",  # not the security company
    ],
)
def test_near_misses_stay_unlabelled(text: str) -> None:
    assert shipped().categories(text) == []


def test_a_near_miss_masks_only_itself() -> None:
    assert shipped().categories("병원놀이 하다가 다쳐서 병원 갔어") == ["health"]
    assert shipped().categories("약속 있는데 약 먹고 갈게") == ["health"]


@pytest.mark.parametrize(
    ("form", "stems"),
    [
        ("아프다", {"아파", "아팠", "아픈", "아플", "아프고", "아프지"}),
        ("우울하다", {"우울해", "우울했", "우울한", "우울하고"}),
        ("어지럽다", {"어지러워", "어지러웠", "어지러운", "어지럽고"}),
        ("저리다", {"저려", "저렸", "저린"}),
        ("마르다", {"말라", "말랐"}),
        ("슬프다", {"슬퍼", "슬펐"}),
    ],
)
def test_a_predicate_yields_its_conjugated_stems(form: str, stems: set[str]) -> None:
    assert stems <= set(surface_stems(form))


def test_a_deployment_file_extends_every_kind(tmp_path: Path) -> None:
    extra = tmp_path / "extra.json"
    extra.write_text(
        json.dumps(
            {
                "health": [
                    {"term": "통풍", "match": "noun"},
                    {"term": "붓다", "match": "predicate"},
                    {"term": "통풍구", "match": "not"},
                ],
                "hobby": [{"term": r"낚시(?:대|터)", "match": "regex"}],
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    extended = lexicon(str(extra))
    assert extended.categories("아빠 통풍이래") == ["health"]
    assert extended.categories("발목이 붓고 있어") == ["health"]
    assert extended.categories("통풍구 청소해줘") == []
    assert extended.categories("낚시터 가자") == ["hobby"]
    assert extended.fingerprint() != shipped().fingerprint()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"health": [{"term": "(", "match": "regex"}]}, "not a regular expression"),
        ({"health": [{"term": "x*", "match": "regex"}]}, "matches everything"),
        ({"health": [{"term": "a" * 400, "match": "regex"}]}, "at most 300"),
        ({"health": [{"term": "pain", "match": "predicate"}]}, "dictionary form"),
    ],
)
def test_bad_terms_of_the_new_kinds_are_refused(raw: object, message: str) -> None:
    with pytest.raises(LexiconError, match=message):
        parse_lexicon(raw)
