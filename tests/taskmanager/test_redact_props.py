"""Redaction by fragments (issue 33 item 3, SPEC §5.5): whatever a plan quotes of the utterance
— any run of two or more of its words, however spaced, cased, run onto other text or nested —
and any sensitive term are gone from the copy the trace keeps; what quotes nothing stays."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cache.lexicon import shipped
from taskmanager.redact import USER_WORDS, fold, without_words, words_of

KOREAN = [
    *("엄마가", "암에", "걸렸어", "정신과", "다녀왔어", "나", "요즘", "우울해", "아침약"),
    *("챙겨줘", "거실", "불", "좀", "켜줘", "병원", "가는", "길", "안내해줘", "내일", "약속"),
]
ENGLISH = ["my", "mother", "has", "cancer", "take", "me", "to", "the", "clinic", "Please"]
SYLLABLES = st.characters(min_codepoint=0xAC00, max_codepoint=0xAC00 + 400)
WORD = st.one_of(
    st.sampled_from(KOREAN + ENGLISH),
    st.text(SYLLABLES, min_size=1, max_size=4),
    st.text(st.sampled_from("abcdefxyz"), min_size=2, max_size=6),
)
SEPARATORS = [" ", "  ", "", "-", "\t", "\u200b", ", ", "_", "\u3000"]
NEUTRAL = st.sampled_from(["s1", "display", "show_content", "route", "wf-1", "", "ok"])


@st.composite
def quote(draw: st.DrawFn, words: list[str]) -> str:
    """A run of two or more consecutive words, re-spaced, re-cased, with text around it."""
    start = draw(st.integers(0, len(words) - 2))
    end = draw(st.integers(start + 2, len(words)))
    run = words[start]
    for word in words[start + 1 : end]:
        run += draw(st.sampled_from(SEPARATORS)) + word
    if draw(st.booleans()):
        run = run.upper()
    before = draw(st.sampled_from(["", "user said: ", "사용자: ", "«"]))
    after = draw(st.sampled_from(["", "서", "요", " please", "»"]))
    return before + run + after


@st.composite
def plan_quoting(draw: st.DrawFn, words: list[str]) -> Any:
    leaf = st.one_of(quote(words), NEUTRAL, st.integers(0, 9))
    return draw(
        st.recursive(
            leaf,
            lambda inner: st.one_of(
                st.lists(inner, max_size=3),
                st.dictionaries(st.one_of(NEUTRAL, quote(words)), inner, max_size=3),
            ),
            max_leaves=12,
        )
    )


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def quoted_fragments(text: str, utterance: str) -> list[str]:
    """Runs of two consecutive words of `utterance` in `text`, separators ignored (the
    checker's own rule, not the redactor's)."""
    bare = re.sub(r"[\W_]+", "", fold(text))
    tokens = words_of(utterance)
    return [a + b for a, b in itertools.pairwise(tokens) if a + b in bare]


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_no_fragment_of_the_utterance_survives(data: st.DataObject) -> None:
    words = data.draw(st.lists(WORD, min_size=2, max_size=8))
    utterance = " ".join(words)
    plan = data.draw(plan_quoting(words))
    kept = without_words(plan, utterance, classify=shipped().categories)
    for text in strings(kept):
        assert not quoted_fragments(text, utterance), (text, utterance, kept)
        assert not shipped().categories(text), (text, kept)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_what_quotes_nothing_is_kept_as_it_came(data: st.DataObject) -> None:
    words = data.draw(st.lists(st.sampled_from(KOREAN), min_size=2, max_size=6, unique=True))
    plan = {
        "workflow_id": "wf-1",
        "steps": [{"step_id": "s1", "args": {"room": words[0], "n": 3}}],  # one word: no run
    }
    assert without_words(plan, " ".join(words)) == plan


def test_the_issue_case() -> None:
    utterance = "엄마가 암에 걸렸어 병원 가는 길 안내해줘"
    plan = {
        "steps": [{"step_id": "s1", "args": {"caption": "엄마가 암에 걸렸어서", "id": "route"}}],
        "note": "user said 병원  가는 길",
        "reason": "암",  # one word, a sensitive term: the classifier's
    }
    kept = without_words(plan, utterance, classify=shipped().categories)
    assert kept["steps"][0]["args"] == {"caption": USER_WORDS, "id": "route"}
    assert kept["note"] == USER_WORDS and kept["reason"] == USER_WORDS
    text = json.dumps(kept, ensure_ascii=False)
    assert "걸렸어" not in text and "가는 길" not in text


def test_a_refused_requests_kept_copy_is_bounded_whatever_arrived() -> None:
    """A hostile plan of 10,000 steps is kept as its first items and a count, strings cut: the
    copy costs the same to redact and store as a normal request (a 10,000-step refusal took
    3.8 s of the device's CPU when every step was redacted and stored)."""
    from taskmanager.redact import KEEP_CHARS, KEEP_ITEMS, bounded

    steps = [{"step_id": f"s{n}", "note": "가" * 5000} for n in range(10_000)]
    kept = bounded({"workflow_id": "wf-c", "steps": steps})
    assert len(kept["steps"]) == KEEP_ITEMS + 1
    assert kept["steps"][-1] == f"… {10_000 - KEEP_ITEMS} more"
    assert len(kept["steps"][0]["note"]) == KEEP_CHARS + 1
    assert bounded({"a": [1, "b"]}) == {"a": [1, "b"]}  # a normal request is kept whole
