"""Korean morphology the lexicon needs, without an analyzer (docs/design.md, "The classifier"):
a predicate's surface stems from its dictionary form, and the endings a noun takes.

`surface_stems("아프다")` gives every stem a conjugated form of 아프다 starts with — 아프고,
아프지, 아파, 아팠, 아픈, 아플, 아픔, 아픕… — so a text holding any of them (나 머리 아파, 아팠어,
아픈데) holds the predicate. The rules are the regular ones plus the irregular classes that
matter for how people speak of their body and mood: 하다 (우울해), ㅡ-dropping (아파, 슬퍼;
spoken 아퍼), ㅂ-irregular (어지러워, 가려워; spoken 어지러버), 르-irregular (말라), ㅣ→ㅕ (저려,
다쳐), ㅗ/ㅜ→ㅘ/ㅝ.
"""

from __future__ import annotations

_BASE, _LAST = 0xAC00, 0xD7A3
# jamo indices (Unicode's order)
_A, _AE, _EO, _E, _YEO, _O, _WA, _U, _WO, _EU, _I = 0, 1, 4, 5, 6, 8, 9, 13, 14, 18, 20
_N, _L, _M, _B, _SS = 4, 8, 16, 17, 20  # finals: ㄴ ㄹ ㅁ ㅂ ㅆ
_IEUNG = 11  # initial ㅇ

# endings that follow a stem as it is (a vowel-final stem, or a consonant-final one before a
# consonant): 아프고, 아프지, 우울하다, 어지럽네, 아프세요, 아프셨어, 아프잖아…
CONSONANT_ENDINGS = (
    "고", "지", "다", "네", "게", "기", "더", "던", "잖", "죠", "대", "래", "냐", "니", "나",
    "세", "셔", "셨", "시", "면", "는", "구", "군", "길", "든",
)  # fmt: skip
# what follows a noun inside its word: particles (josa) and the copula's forms
NOUN_ENDINGS = (
    "으로써", "으로서", "에게서", "이라도", "이었어", "이었는데", "이에요", "이래요", "이라서",
    "이라고", "이었", "이래", "이라", "이야", "이지", "이네", "이고", "인데", "인가", "일까",
    "이다", "이랑", "하고", "까지", "부터", "보다", "처럼", "에서", "에게", "한테", "으로",
    "이나", "이든", "마저", "조차", "밖에", "라도", "예요", "였어", "에요", "래요", "라서",
    "라고", "을", "를", "이", "가", "은", "는", "도", "만", "과", "와", "의", "에", "로", "랑",
    "나", "요", "든", "야", "래", "였", "다", "지", "네", "인",
)  # fmt: skip


def is_hangul(c: str) -> bool:
    return _BASE <= ord(c) <= _LAST


def split(c: str) -> tuple[int, int, int]:
    """A syllable's (initial, vowel, final) indices."""
    code = ord(c) - _BASE
    return code // 588, (code % 588) // 28, code % 28


def join(initial: int, vowel: int, final: int = 0) -> str:
    return chr(_BASE + (initial * 21 + vowel) * 28 + final)


def with_final(c: str, final: int) -> str:
    initial, vowel, _ = split(c)
    return join(initial, vowel, final)


def _bright(stem: str) -> bool:
    """Does the ending take 아 (a stem whose last full vowel is ㅏ or ㅗ) rather than 어?"""
    for c in reversed(stem):
        vowel = split(c)[1]
        if vowel != _EU or c == stem[0]:
            return vowel in (_A, _O)
    return False


def _a_form(stem: str) -> list[str]:
    """The stem with the 아/어 ending joined (우울하 → 우울해, 아프 → 아파, 어지럽 → 어지러워)."""
    head, last = stem[:-1], stem[-1]
    initial, vowel, final = split(last)
    if final == _B:  # ㅂ-irregular: 어지럽 → 어지러워 (돕/곱 → 도와: rare in what we list),
        # and the south-eastern (Gyeongsang) spoken form 어지러버, 메스꺼버
        open_ = head + join(initial, vowel)
        return [open_ + "워", open_ + "와", open_ + "버"]
    if final:
        return [stem + ("아" if _bright(stem) else "어")]
    if last == "하":
        return [head + "해", head + "하여"]
    if last == "르" and head:  # 르-irregular: 마르 → 말라, 부르 → 불러
        prev = with_final(head[-1], _L)
        return [head[:-1] + prev + ("라" if _bright(head) else "러")]
    if vowel == _EU:  # 아프 → 아파, 슬프 → 슬퍼, 크 → 커; spoken, the bright ones go dark too
        dark = head + join(initial, _EO)  # 아퍼, 아펐어 (ASR and chat spell it as it is said)
        return [head + join(initial, _A), dark] if head and _bright(head) else [dark]
    if vowel == _I:  # 저리 → 저려, 다치 → 다쳐
        return [head + join(initial, _YEO), stem + "어"]
    if vowel == _O:
        return [head + join(initial, _WA), stem + "아"]
    if vowel == _U:
        return [head + join(initial, _WO), stem + "어"]
    if vowel in (_A, _EO, _AE, _E, _YEO):
        return [stem]
    return [stem + ("아" if _bright(stem) else "어")]


def surface_stems(dictionary_form: str) -> list[str]:
    """The stems any conjugated form of a predicate (dictionary form, ending in 다) starts with,
    longest first; [] when it is not a Korean predicate."""
    if len(dictionary_form) < 2 or not dictionary_form.endswith("다"):
        return []
    stem = dictionary_form[:-1]
    if not all(is_hangul(c) for c in stem):
        return []
    head, last = stem[:-1], stem[-1]
    initial, vowel, final = split(last)
    forms = [stem + e for e in CONSONANT_ENDINGS]
    if final == _B:  # the vowel-ending forms go through 우: 어지러운, 어지러울, 어지러우면
        base = head + join(initial, vowel) + "우"
        vowel_base = [base]
    elif final:
        vowel_base = [stem + "으"]
    else:
        vowel_base = [stem]
    for base in vowel_base:
        forms += [base[:-1] + with_final(base[-1], f) for f in (_N, _L, _M)]
        forms += [base + e for e in ("면", "니", "세", "시", "셨")]
    if not final:
        forms.append(head + with_final(last, _B))  # 아픕니다
    for a in _a_form(stem):
        forms.append(a)
        forms.append(a[:-1] + with_final(a[-1], _SS))  # 아팠, 우울했, 어지러웠
    seen: dict[str, None] = {}
    for form in forms:
        seen.setdefault(form, None)
    return sorted(seen, key=lambda f: (-len(f), f))
