"""The lexicon reads several texts as the union of each text's own categories, each remembered
by a digest of its text (cache/lexicon.py, `Lexicon.categories`). That is what reading them
together as one joined text finds — the rule before (forms joined by NUL, no match spanning
two texts) — on the privacy evaluation and held-out sets, texts paired with many others."""

from __future__ import annotations

import json
from pathlib import Path

from cache.lexicon import _TEXTS_APART, SEEN_TEXTS, Forms, Lexicon, parse_lexicon, shipped

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _texts() -> list[str]:
    texts = []
    for name in ("privacy_eval.jsonl", "privacy_holdout.jsonl"):
        for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line)["text"])
    return texts


def _together(lexicon: Lexicon, *texts: str) -> list[str]:
    """The categories of `texts` read at once, their forms joined by NUL (the rule before)."""
    forms = [Forms.of(t) for t in texts if t]
    if not forms:
        return []
    order = ("compact", "glued", "spaced", "letters", "folded")  # `_Matcher.found_in`'s
    joined = [_TEXTS_APART.join(getattr(f, k) for f in forms) for k in order]
    return [name for name, matcher in lexicon._matchers if matcher.found_in(*joined)]


def test_texts_read_apart_find_what_they_find_read_together() -> None:
    texts = _texts()
    assert len(texts) > 400
    cold, warm = Lexicon(shipped().terms), shipped()
    for text in texts:
        warm.categories(text)
    for step in (1, 2, 7, 31, 113):
        for i, first in enumerate(texts):
            second = texts[(i + step) % len(texts)]
            expected = _together(cold, first, second)
            cold._seen.clear()  # nothing remembered: each text read now
            assert cold.categories(first, second) == expected, (first, second)
            assert warm.categories(first, second) == expected, (first, second)
    for i in range(0, len(texts), 3):  # three at once, an empty one among them
        three = (texts[i], "", texts[(i + 5) % len(texts)], texts[(i + 50) % len(texts)])
        assert warm.categories(*three) == _together(cold, *three)


def test_remembered_by_digest_and_bounded() -> None:
    lexicon = Lexicon(shipped().terms)
    assert lexicon.categories("할아버지 혈압약 드셨는지 확인해줘") == ["health"]
    assert lexicon.categories("할아버지 혈압약 드셨는지 확인해줘", "") == ["health"]
    assert all(isinstance(key, bytes) and len(key) == 16 for key in lexicon._seen)
    for n in range(SEEN_TEXTS + 40):
        lexicon.categories(f"오늘 {n}번째 이야기")
    assert len(lexicon._seen) == SEEN_TEXTS


def test_an_extended_lexicon_reads_anew() -> None:
    base = shipped()
    assert base.categories("zorblax 켜줘") == []
    grown = base.extended(parse_lexicon({"contact": ["zorblax"]}))
    assert grown.categories("zorblax 켜줘") == ["contact"]
    assert base.categories("zorblax 켜줘") == []
