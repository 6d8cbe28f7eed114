"""The category lexicon (SPEC §5.5): terms per category, Korean and English, matched without a
tokenizer.

Text and terms are compared after NFC normalisation and case folding. A term matches in one of
two ways:
- `substring` (a plain string in the file): anywhere in the text. For terms long or distinctive
  enough that they mean the same inside a longer word (혈압 in 혈압약, 비밀번호 in 현관비밀번호).
- `word` (`{"term": "약", "match": "word"}`): only as a whole word — it starts a word (text start
  or a character that is not a letter or digit before it) and the rest of that word is empty or
  made only of Korean particles (josa: 을, 이랑, 도, 요, …). So 약 matches "약 먹고", "약을",
  "약이랑도" and never "약속", "약간", "절약"; `pill` matches "pill," but not "pillow".

The shipped lexicon is `cache/lexicon.json`; `privacy.lexicon_file` (JSON or TOML, same shape)
adds terms to it. Matching errs towards a category: a false positive only keeps a text on the
device, a false negative would send it away.
"""

from __future__ import annotations

import json
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from cache.errors import CacheError

MATCHES = ("substring", "word")
JOSA = (
    "으로써", "으로서", "에게서", "이라도", "이랑", "하고", "까지", "부터", "보다", "처럼", "에서",
    "에게", "한테", "으로", "이나", "이든", "마저", "조차", "밖에", "라도", "을", "를", "이",
    "가", "은", "는", "도", "만", "과", "와", "의", "에", "로", "랑", "나", "요", "든", "야",
)  # fmt: skip
MAX_TERMS = 10_000
MAX_TERM_CHARS = 64


class LexiconError(CacheError, ValueError):
    """A lexicon file that cannot be used (the message says where); a ValueError too, so
    that the config's validator turns it into a config error naming the key."""


def fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def _josa_only(rest: str) -> bool:
    """The rest of a word is empty or a sequence of particles."""
    ends = {0}
    for i in range(len(rest)):
        if i in ends:
            ends |= {i + len(j) for j in JOSA if rest.startswith(j, i)}
    return len(rest) in ends


@dataclass(frozen=True)
class Term:
    text: str  # folded
    match: str = "substring"

    def found_in(self, folded: str) -> bool:
        if self.match == "substring":
            return self.text in folded
        start = folded.find(self.text)
        while start >= 0:
            end = start + len(self.text)
            if start == 0 or not folded[start - 1].isalnum():
                stop = end
                while stop < len(folded) and folded[stop].isalnum():
                    stop += 1
                if _josa_only(folded[end:stop]):
                    return True
            start = folded.find(self.text, start + 1)
        return False


@dataclass(frozen=True)
class Lexicon:
    terms: Mapping[str, tuple[Term, ...]]

    def categories(self, *texts: str) -> list[str]:
        """The categories whose terms occur in any of `texts`, sorted by name."""
        folded = [fold(t) for t in texts if t]
        if not folded:
            return []
        return sorted(
            name
            for name, terms in self.terms.items()
            if any(term.found_in(text) for term in terms for text in folded)
        )

    def extended(self, other: Lexicon) -> Lexicon:
        merged = {name: list(terms) for name, terms in self.terms.items()}
        for name, terms in other.terms.items():
            merged.setdefault(name, [])
            merged[name] += [t for t in terms if t not in merged[name]]
        return Lexicon({name: tuple(terms) for name, terms in merged.items()})


def _term(raw: Any, where: str) -> Term:
    if isinstance(raw, str):
        text, match = raw, "substring"
    elif isinstance(raw, dict) and set(raw) <= {"term", "match"} and "term" in raw:
        text, match = raw["term"], raw.get("match", "substring")
    else:
        raise LexiconError(f"{where}: a term is a string or {{term, match}}")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TERM_CHARS:
        raise LexiconError(f"{where}: a term is a non-empty string of at most 64 characters")
    if match not in MATCHES:
        raise LexiconError(f"{where}: match must be substring or word (got {match!r})")
    return Term(fold(text.strip()), match)


def parse_lexicon(data: Any, source: str = "lexicon") -> Lexicon:
    """`{"category": [term, …], …}`; keys starting with `_` are comments."""
    if not isinstance(data, dict):
        raise LexiconError(f"{source}: must be a table of category -> list of terms")
    terms: dict[str, tuple[Term, ...]] = {}
    count = 0
    for name, raw in data.items():
        if name.startswith("_"):
            continue
        where = f"{source}: {name}"
        if not name.strip() or len(name) > 64:
            raise LexiconError(f"{where}: a category name is 1 to 64 characters")
        if not isinstance(raw, list):
            raise LexiconError(f"{where}: must be a list of terms")
        count += len(raw)
        if count > MAX_TERMS:
            raise LexiconError(f"{source}: more than {MAX_TERMS} terms")
        terms[name.strip().lower()] = tuple(_term(t, where) for t in raw)
    return Lexicon(terms)


def load_lexicon_file(path: str) -> Lexicon:
    """A lexicon file (`.toml` as TOML, anything else as JSON)."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise LexiconError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        if file.suffix.lower() == ".toml":
            data: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if file.suffix.lower() == ".toml" else "JSON"
        raise LexiconError(f"{path} is not valid {kind}: {exc}") from None
    return parse_lexicon(data, path)


@lru_cache(maxsize=1)
def shipped() -> Lexicon:
    text = resources.files("cache").joinpath("lexicon.json").read_text(encoding="utf-8")
    return parse_lexicon(json.loads(text), "cache/lexicon.json")


def lexicon(extra_file: str = "") -> Lexicon:
    """The shipped lexicon, extended by `extra_file` when given."""
    base = shipped()
    return base.extended(load_lexicon_file(extra_file)) if extra_file else base


def categories_of(texts: Iterable[str]) -> list[str]:
    """With the shipped lexicon only (migrations: no config there)."""
    return shipped().categories(*texts)
