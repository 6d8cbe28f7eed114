"""The category lexicon (SPEC §5.5): terms per category, Korean and English, matched without a
tokenizer.

Text and terms are compared on a skeleton (`fold`): NFKC, case-folded, format characters (Cf:
zero-width space, soft hyphen, BOM…) dropped; then split into tokens of letters and digits, so
whitespace, hyphens and punctuation are only separators and never hide a term (`Term.found_in`
says exactly how: a spaced-out or run-together multi-word term still matches). A term matches in
one of two ways:
- `substring` (a plain string in the file): anywhere in the text. For terms long or distinctive
  enough that they mean the same inside a longer word (혈압 in 혈압약, 비밀번호 in 현관비밀번호).
- `word` (`{"term": "약", "match": "word"}`): only as a whole word — it starts a word (text start
  or a character that is not a letter or digit before it) and the rest of that word is empty or
  made only of Korean particles (josa: 을, 이랑, 도, 요, …). So 약 matches "약 먹고", "약을",
  "약이랑도" and never "약속", "약간", "절약"; `pill` matches "pill," but not "pillow".

Korean is read as Korean (cache/korean.py; docs/design.md, "The classifier"), by three more kinds:
- `noun` (`{"term": "약", "match": "noun"}`): a whole word as `word` does, its particles or the
  copula after it (약이야, 암이래), or the tail of a compound of at least two syllables before
  it (아침약, 혈압약, 유방암), never 약속, 절약 or 암호.
- `predicate` (`{"term": "아프다", "match": "predicate"}`, the dictionary form): any conjugated
  form, in a word or after a noun run into it (아파, 아팠어, 아픈데, 머리아파, 어지러워).
- `regex` (`{"term": "...", "match": "regex"}`): a Python regular expression over the folded
  text (NFKC, case-folded, format characters dropped; separators kept): phone numbers, e-mail,
  addresses, door codes.
And one that finds nothing: `not` (`{"term": "약속", "match": "not"}`), a near miss of the
category — its spans (spaces inside it allowed) are masked before the category's other terms
are looked for, so "병원놀이" is not 병원 and "암호화폐" is not 암호, while "병원놀이 하다 다쳐서
병원 갔어" still is; and `not_regex`, a near miss given as a pattern where a family of them has
one shape (약 before a quantity is "about": 약 10분, 약 3킬로), masked the same way in every form
(so it sees the compact form too: a pattern's ` ?` covers the separators).

The shipped lexicon is `cache/lexicon.json`; `privacy.lexicon_file` (JSON or TOML, same shape)
adds terms to it. Matching errs towards a category: a false positive only keeps a text on the
device, a false negative would send it away.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
import threading
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from cache.errors import CacheError
from cache.korean import NOUN_ENDINGS, surface_stems

MATCHES = ("substring", "word", "noun", "predicate", "regex", "not", "not_regex")
KEYED = ("substring", "predicate")  # matched as keys in the compact or glued form
JOSA = (
    "으로써", "으로서", "에게서", "이라도", "이랑", "하고", "까지", "부터", "보다", "처럼", "에서",
    "에게", "한테", "으로", "이나", "이든", "마저", "조차", "밖에", "라도", "을", "를", "이",
    "가", "은", "는", "도", "만", "과", "와", "의", "에", "로", "랑", "나", "요", "든", "야",
)  # fmt: skip
MAX_TERMS = 10_000
MAX_TERM_CHARS = 64
MAX_PATTERN_CHARS = 300
SEEN_TEXTS = 256  # texts whose categories are remembered (by digest)
RULES = 4  # bump when the matching rules change: stored texts are labelled again


class LexiconError(CacheError, ValueError):
    """A lexicon file that cannot be used (the message says where); a ValueError too, so
    that the config's validator turns it into a config error naming the key."""


def fold(text: str) -> str:
    """The skeleton a text is matched on: NFKC (full-width and compatibility forms fold to
    their plain letters), case-folded, format characters (Unicode Cf: zero-width space and
    joiner, soft hyphen, BOM, bidi marks) dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if folded.isprintable():  # no Cf among them (Cf is not printable): nothing to drop
        return unicodedata.normalize("NFC", folded)
    kept = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFC", kept)


def fold_name(name: str) -> str:
    """The form a category name is kept and compared in (NFKC, case-folded, stripped)."""
    return unicodedata.normalize("NFKC", name).casefold().strip()


_TOKEN = re.compile(r"[^\W_]+")  # a run of letters and digits; all else separates


def _hangul(c: str) -> bool:
    return "\uac00" <= c <= "\ud7a3"


def _weight(key: str) -> int:
    """Letters' weight: a Hangul syllable is two, any other letter or digit one."""
    return sum(2 if _hangul(c) else 1 for c in key)


COMPACT_WEIGHT = 6  # a key this heavy matches across any separator (혈압약 ≈ 3 syllables)


def _glue(tokens: list[str], single: bool) -> str:
    """Tokens joined by a space, except next to a one-letter token (`single`: only between
    two one-letter tokens), where they are joined without one: "혈 압 재줘" -> "혈압재줘"."""
    out = tokens[0] if tokens else ""
    for prev, tok in itertools.pairwise(tokens):
        one = (len(prev) == 1, len(tok) == 1)
        short = all(one) if single else any(one)
        out += tok if short else " " + tok
    return out


@dataclass(frozen=True)
class Forms:
    """A text's forms for matching (see `Term.found_in`)."""

    spaced: str  # tokens joined by one space
    glued: str  # ... a one-letter token joined to its neighbours
    letters: str  # ... runs of one-letter tokens joined ("p i l l" -> "pill")
    compact: str  # no separators at all
    folded: str = ""  # the folded text itself, separators kept (`regex` terms)

    @staticmethod
    def of(text: str) -> Forms:
        folded = fold(text)
        tokens = _TOKEN.findall(folded)
        return Forms(
            " ".join(tokens), _glue(tokens, False), _glue(tokens, True), "".join(tokens), folded
        )


def _josa_only(rest: str) -> bool:
    """The rest of a word is empty or a sequence of particles."""
    ends = {0}
    for i in range(len(rest)):
        if i in ends:
            ends |= {i + len(j) for j in JOSA if rest.startswith(j, i)}
    return len(rest) in ends


def _word_in(word: str, spaced: str) -> bool:
    start = spaced.find(word)
    while start >= 0:
        end = start + len(word)
        if start == 0 or spaced[start - 1] == " ":
            stop = spaced.find(" ", end)
            if _josa_only(spaced[end : stop if stop >= 0 else len(spaced)]):
                return True
        start = spaced.find(word, start + 1)
    return False


@dataclass(frozen=True)
class Term:
    text: str  # folded, its tokens joined by one space
    match: str = "substring"

    @property
    def form(self) -> str:
        """The form of a text this term is looked for in (see `found_in`): `word`, `compact`
        or `glued`; a `noun`, `predicate`, `regex` or `not` term names its own kind."""
        if self.match != "substring":
            return self.match
        if " " in self.text or _weight(self.text) >= COMPACT_WEIGHT:
            return "compact"
        return "glued"

    def search_keys(self) -> list[str]:
        """The keys a `substring` or `predicate` term is found by (a predicate's surface
        stems, cache/korean.py)."""
        if self.match == "predicate":
            return surface_stems(self.text)
        return [self.text.replace(" ", "")]

    def found_in(self, forms: Forms) -> bool:
        """Separators (whitespace, hyphens, punctuation) never hide a term:
        - a `word` term is a whole word of the spaced form, or of the form where runs of
          one-letter tokens are joined ("p i l l s");
        - a `substring` term of several words, or of at least six letters' weight, is found in
          the compact form ("Blood  Pressure", "bloodpressure", "고혈 압");
        - a shorter one is found in the glued form: a space next to a one-letter token does not
          separate ("혈 압 재줘", "혈 압약"), one between two longer words does ("지금 고기" has
          no 금고).
        The reference rule, one term at a time; `Lexicon.categories` runs the same rule for
        all terms at once (`_Matcher`)."""
        if self.form == "word":
            return _word_in(self.text, forms.spaced) or _word_in(self.text, forms.letters)
        if self.match != "substring":
            return _single(self).found_in(
                forms.compact, forms.glued, forms.spaced, forms.letters, forms.folded
            )
        key = self.text.replace(" ", "")
        return key in (forms.compact if self.form == "compact" else forms.glued)


_JOSA_RUN = "(?:" + "|".join(JOSA) + ")*"
_NOUN_END = "(?:" + "|".join(sorted(NOUN_ENDINGS, key=lambda e: (-len(e), e))) + ")*"
_MASK = "\x01"  # what a near miss (`not`) becomes: neither a letter nor a separator
_TEXTS_APART = "\x00"  # joins the forms of several texts: never in a form, never in a term


def _alternation(keys: Iterable[str]) -> str:
    """The keys as one expression, their common prefixes factored out (a trie: 아파|아팠|아픈
    is 아(?:파|팠|픈)), so a search tries the keys that share a text's next letters only, not
    every key at every position (the predicates' stems made the flat list 5x slower)."""
    trie: dict[str, Any] = {}
    for key in set(keys):
        node = trie
        for c in key:
            node = node.setdefault(c, {})
        node[""] = {}  # a key ends here
    return _trie_pattern(trie)


def _trie_pattern(node: dict[str, Any]) -> str:
    ends = "" in node
    branches = [re.escape(c) + _trie_pattern(child) for c, child in sorted(node.items()) if c]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if ends:  # a key ends here and longer ones go on: the longer first, then the end
        return f"(?:{body})?" if len(branches) == 1 else body + "?"
    return body


class _Matcher:
    """One category's terms as three regular expressions, one per form (`Term.found_in`'s rule
    for all of them at once, each a single scan in C instead of a Python loop over terms):
    substring keys in the compact and the glued forms; word terms at a word start of the
    spaced or letters form, the rest of their word particles only (`_josa_only`). The forms of
    several texts are joined by NUL, which no form and no term holds, so no match spans two
    texts, and a word boundary is a space, NUL or either end."""

    def __init__(self, terms: Iterable[Term]) -> None:
        by_form: dict[str, list[str]] = {
            "word": [], "compact": [], "glued": [], "noun": [], "regex": [], "not": []
        }  # fmt: skip
        for term in terms:
            if term.match in KEYED:
                for key in term.search_keys():
                    compact = " " in term.text or _weight(key) >= COMPACT_WEIGHT
                    by_form["compact" if compact else "glued"].append(key)
            elif term.match == "not":
                by_form["not"].append(r" ?".join(re.escape(c) for c in term.text if c != " "))
            elif term.match == "not_regex":
                by_form["not"].append(f"(?:{term.text})")
            else:
                by_form[term.match].append(term.text)
        self.compact = self._compile(by_form["compact"])
        self.glued = self._compile(by_form["glued"])
        edge = f"(?<![^ {_TEXTS_APART}])"
        after = f"(?![^ {_TEXTS_APART}])"
        words, nouns = by_form["word"], by_form["noun"]
        self.word = (
            re.compile(f"{edge}(?:{_alternation(words)}){_JOSA_RUN}{after}") if words else None
        )
        self.noun = (
            re.compile(f"{edge}(?:[가-힣]{{2,}})?(?:{_alternation(nouns)}){_NOUN_END}{after}")
            if nouns
            else None
        )
        patterns = by_form["regex"]
        self.regex = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        masks = sorted(set(by_form["not"]), key=lambda k: (-len(k), k))
        self.mask = re.compile("|".join(masks)) if masks else None

    @staticmethod
    def _compile(keys: list[str]) -> re.Pattern[str] | None:
        return re.compile(_alternation(keys)) if keys else None

    def found_in(self, compact: str, glued: str, spaced: str, letters: str, folded: str) -> bool:
        if self.mask is not None:  # near misses first: what they cover is no term
            mask = self.mask
            compact, glued, spaced, letters, folded = (
                mask.sub(_MASK, f) for f in (compact, glued, spaced, letters, folded)
            )
        if self.compact is not None and self.compact.search(compact):
            return True
        if self.glued is not None and self.glued.search(glued):
            return True
        for expression in (self.word, self.noun):
            if expression is not None and (expression.search(spaced) or expression.search(letters)):
                return True
        regex = self.regex  # each text apart: a pattern's `[^.]*` would cross the NUL
        return regex is not None and any(regex.search(t) for t in folded.split(_TEXTS_APART))


@lru_cache(maxsize=4096)
def _single(term: Term) -> _Matcher:
    """One term's matcher (the reference rule for the kinds only a matcher runs)."""
    return _Matcher((term,))


@dataclass(frozen=True)
class Lexicon:
    terms: Mapping[str, tuple[Term, ...]]
    _seen: dict[bytes, tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _seen_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def categories(self, *texts: str) -> list[str]:
        """The categories whose terms occur in any of `texts`, sorted by name: the union of
        each text's own (no match spans two texts, so that is what reading them together
        finds; tests/cache/test_lexicon_cache.py checks it on the evaluation set)."""
        found: set[str] = set()
        for text in texts:
            if text:
                found.update(self._of_text(text))
        return sorted(found)

    def _of_text(self, text: str) -> tuple[str, ...]:
        """One text's categories, remembered for the last `SEEN_TEXTS` texts by a digest of
        the text (its words are not kept): a turn's utterance is read when it is taken in
        and again when the turn closes with the reply."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        seen = self._seen
        found = seen.get(key)
        if found is None:
            found = self._match(Forms.of(text))
            with self._seen_lock:
                if len(seen) >= SEEN_TEXTS:
                    seen.pop(next(iter(seen)), None)  # the oldest
                seen[key] = found
        return found

    def _match(self, forms: Forms) -> tuple[str, ...]:
        each = (forms.compact, forms.glued, forms.spaced, forms.letters, forms.folded)
        return tuple(name for name, matcher in self._matchers if matcher.found_in(*each))

    def masked(self, name: str, text: str) -> Forms:
        """`text`'s forms with category `name`'s near misses masked (what its terms see)."""
        forms = Forms.of(text)
        mask = dict(self._matchers)[name].mask if name in self.terms else None
        if mask is None:
            return forms
        return Forms(*(mask.sub(_MASK, f) for f in dataclasses.astuple(forms)))

    def prepare(self) -> None:
        """Compile every category's expressions now (a few ms for the shipped lexicon, longer
        for a large lexicon_file) rather than in the first text's turn."""
        _ = self._matchers

    @cached_property
    def _matchers(self) -> tuple[tuple[str, _Matcher], ...]:
        """Each category's terms compiled once, by category name."""
        return tuple((name, _Matcher(terms)) for name, terms in sorted(self.terms.items()))

    def fingerprint(self) -> str:
        """A digest of the effective terms (and of how they are matched): when it changes,
        what is stored is labelled again (cache/relabel.py)."""
        body = json.dumps(
            {
                "rules": RULES,
                "terms": {
                    n: [[t.text, t.match] for t in ts] for n, ts in sorted(self.terms.items())
                },
            },
            ensure_ascii=False,
            sort_keys=True,
        )
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]

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
    if match in ("regex", "not_regex") and isinstance(text, str):
        return _pattern(text, where, match)
    tokens = _TOKEN.findall(fold(text)) if isinstance(text, str) else []
    if not tokens or len(text) > MAX_TERM_CHARS:
        raise LexiconError(
            f"{where}: a term is a non-empty string of at most 64 characters,"
            " with a letter or digit"
        )
    if match not in MATCHES:
        raise LexiconError(f"{where}: match must be one of {', '.join(MATCHES)} (got {match!r})")
    if match == "predicate" and not surface_stems(" ".join(tokens)):
        raise LexiconError(f"{where}: a predicate is a Korean dictionary form ending in 다")
    return Term(" ".join(tokens), match)


def _pattern(text: str, where: str, match: str = "regex") -> Term:
    if len(text) > MAX_PATTERN_CHARS:
        raise LexiconError(f"{where}: a pattern is at most {MAX_PATTERN_CHARS} characters")
    try:
        compiled = re.compile(text)
    except re.error as exc:
        raise LexiconError(f"{where}: not a regular expression ({exc})") from None
    if compiled.search(""):
        raise LexiconError(f"{where}: a pattern that matches the empty text matches everything")
    return Term(text, match)


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
        if not fold_name(name) or len(name) > 64:
            raise LexiconError(f"{where}: a category name is 1 to 64 characters")
        if not isinstance(raw, list):
            raise LexiconError(f"{where}: must be a list of terms")
        count += len(raw)
        if count > MAX_TERMS:
            raise LexiconError(f"{source}: more than {MAX_TERMS} terms")
        key = fold_name(name)
        terms[key] = terms.get(key, ()) + tuple(_term(t, where) for t in raw)
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
