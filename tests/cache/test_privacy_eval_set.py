"""The privacy evaluation set's shape: tests/fixtures/privacy_eval.jsonl (see privacy_eval.md).

The set measures the device's classifier of sensitive categories (issue 33, SPEC 5.5); these
tests hold the set itself to its rules, so a careless edit cannot shrink or blur it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SET = Path(__file__).resolve().parents[1] / "fixtures" / "privacy_eval.jsonl"
CATEGORIES = ("health", "vital", "home_layout", "contact")
LANGS = ("ko", "en", "mixed")
FIELDS = {"id", "text", "categories", "lang", "note"}
MIN_PER_CATEGORY = 55
MIN_NEUTRAL = 130
MIN_NEAR_MISSES = 50
MIN_ENGLISH = 30
MIN_ENGLISH_PER_CATEGORY = 5
MIN_MIXED = 10
MIN_TOTAL = 340


def _rows() -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(SET.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"line {number} is blank"
        row = json.loads(line)
        assert isinstance(row, dict), f"line {number} is not an object"
        rows.append(row)
    return rows


ROWS = _rows()


def _near_miss(row: dict[str, Any]) -> bool:
    return not row["categories"] and str(row.get("note", "")).startswith("near miss")


def test_the_file_is_utf8_json_lines_ending_in_a_newline() -> None:
    raw = SET.read_bytes()
    raw.decode("utf-8")  # raises on anything else
    assert raw.endswith(b"\n")
    assert not raw.startswith(b"\xef\xbb\xbf"), "no byte-order mark"
    assert len(ROWS) >= MIN_TOTAL


@pytest.mark.parametrize("row", ROWS, ids=[str(r.get("id")) for r in ROWS])
def test_each_row_has_the_fields_and_types(row: dict[str, Any]) -> None:
    assert {"id", "text", "categories", "lang"} <= set(row) <= FIELDS
    assert isinstance(row["id"], str) and re.fullmatch(r"[a-z]+-\d{3}", row["id"])
    assert isinstance(row["text"], str) and row["text"].strip() == row["text"] != ""
    assert isinstance(row["categories"], list)
    assert all(c in CATEGORIES for c in row["categories"]), row["categories"]
    assert len(set(row["categories"])) == len(row["categories"]) <= 2
    assert row["lang"] in LANGS
    assert "note" not in row or (isinstance(row["note"], str) and row["note"])


@pytest.mark.parametrize("row", ROWS, ids=[str(r.get("id")) for r in ROWS])
def test_each_text_is_nfc_and_its_lang_matches_its_script(row: dict[str, Any]) -> None:
    text = row["text"]
    assert unicodedata.normalize("NFC", text) == text
    assert not re.search(r"[\u200b-\u200f\u00ad\ufeff\u1100-\u11ff]", text), "plain text only"
    hangul = bool(re.search(r"[\uac00-\ud7a3]", text))
    latin = bool(re.search(r"[A-Za-z]", text))
    expected = "mixed" if hangul and latin else "ko" if hangul else "en"
    assert row["lang"] == expected


def test_ids_and_texts_are_unique() -> None:
    ids = Counter(r["id"] for r in ROWS)
    texts = Counter(unicodedata.normalize("NFC", r["text"]).casefold() for r in ROWS)
    assert [i for i, n in ids.items() if n > 1] == []
    assert [t for t, n in texts.items() if n > 1] == []


def test_every_category_and_neutral_speech_has_its_minimum() -> None:
    per_category = Counter(c for r in ROWS for c in r["categories"])
    for category in CATEGORIES:
        assert per_category[category] >= MIN_PER_CATEGORY, (category, per_category[category])
    neutral = [r for r in ROWS if not r["categories"]]
    assert len(neutral) >= MIN_NEUTRAL
    assert sum(_near_miss(r) for r in neutral) >= MIN_NEAR_MISSES


def test_english_is_spread_across_categories_and_some_text_is_mixed() -> None:
    english = [r for r in ROWS if r["lang"] == "en"]
    assert len(english) >= MIN_ENGLISH
    for category in CATEGORIES:
        count = sum(category in r["categories"] for r in english)
        assert count >= MIN_ENGLISH_PER_CATEGORY, (category, count)
    assert sum(not r["categories"] for r in english) >= MIN_ENGLISH_PER_CATEGORY
    assert sum(r["lang"] == "mixed" for r in ROWS) >= MIN_MIXED


def test_a_near_miss_is_always_neutral() -> None:
    marked = [r["id"] for r in ROWS if str(r.get("note", "")).startswith("near miss")]
    assert [i for i in marked if next(r for r in ROWS if r["id"] == i)["categories"]] == []


def test_the_header_counts_match_the_set() -> None:
    """privacy_eval.md states the counts; a change to the set updates them."""
    header = SET.with_suffix(".md").read_text(encoding="utf-8")
    per_category = Counter(c for r in ROWS for c in r["categories"])
    stated = {
        "total": len(ROWS),
        **{c: per_category[c] for c in CATEGORIES},
        "neutral": sum(not r["categories"] for r in ROWS),
        "near misses": sum(_near_miss(r) for r in ROWS),
        "en": sum(r["lang"] == "en" for r in ROWS),
        "mixed": sum(r["lang"] == "mixed" for r in ROWS),
        "two categories": sum(len(r["categories"]) == 2 for r in ROWS),
    }
    for name, count in stated.items():
        assert f"| {name} | {count} |" in header, (name, count)
