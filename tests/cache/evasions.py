"""Hypothesis strategies for lexicon evasions, drawn from the shipped lexicon's own terms:
full-width forms, mixed case, format characters (zero-width space, soft hyphen, BOM…) anywhere,
separators of a multi-word term replaced by any run of whitespace/hyphens/nothing, a term
spaced out letter by letter, one space inside a term."""

from __future__ import annotations

from hypothesis import strategies as st

from cache.lexicon import COMPACT_WEIGHT, Term, _weight, shipped

CF = ["\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u2060", "\u200e"]
SEPARATORS = [" ", "  ", "\t", "-", "", "\u3000", "_", ".", " - ", "\u00a0"]


def full_width(text: str) -> str:
    return "".join(
        chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text
    )


def terms_of(category: str, match: str | None = None) -> list[Term]:
    return [t for t in shipped().terms[category] if match is None or t.match == match]


@st.composite
def evaded(draw: st.DrawFn, term: Term) -> str:
    """A form of `term` that must still match it."""
    words = term.text.split(" ")
    text = words[0]
    for word in words[1:]:
        text += draw(st.sampled_from(SEPARATORS)) + word
    key = term.text.replace(" ", "")
    splittable = term.match == "substring" and (
        " " in term.text or _weight(key) >= COMPACT_WEIGHT or len(key) == 2
    )
    how = draw(
        st.sampled_from(["none", "spaced", "one_space"] if splittable else ["none", "spaced"])
    )
    if how == "spaced" and len(words) == 1:
        text = " ".join(text)
    elif how == "one_space" and len(text) > 1:
        at = draw(st.integers(1, len(text) - 1))
        text = text[:at] + " " + text[at:]
    text = "".join(c.upper() if draw(st.booleans()) else c for c in text)
    if draw(st.booleans()):
        text = full_width(text)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(CF)) + text[at:]
    return text


@st.composite
def evaded_term(draw: st.DrawFn, category: str) -> str:
    """A listed term (`substring` or `word`: the kinds an evasion is spelled from), evaded."""
    listed = terms_of(category, "substring") + terms_of(category, "word")
    return draw(evaded(draw(st.sampled_from(listed))))
