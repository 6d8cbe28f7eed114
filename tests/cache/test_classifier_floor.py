"""The floor the classifier holds on the labelled evaluation set (issue 33, SPEC §5.5): recall
≥ 0.95 and precision ≥ 0.90 per default sensitive category, so a change that loses recall (or
starts hiding everyday speech) fails here. `python -m bench.classifier` prints the figures."""

from __future__ import annotations

import pytest

from bench.classifier import CATEGORIES, EVAL_SET, load_cases, misses, score
from cache.lexicon import shipped

RECALL, PRECISION = 0.95, 0.90


@pytest.fixture(scope="module")
def labelled() -> tuple[list[dict[str, object]], list[list[str]]]:
    cases = load_cases(EVAL_SET)
    assert len(cases) >= 300
    lexicon = shipped()
    return cases, [lexicon.categories(str(c["text"])) for c in cases]


@pytest.mark.parametrize("category", CATEGORIES)
def test_recall_and_precision_hold_the_floor(
    labelled: tuple[list[dict[str, object]], list[list[str]]], category: str
) -> None:
    cases, labels = labelled
    result = score(cases, labels)[category]
    missed, extra = misses(cases, labels, category)
    assert result.recall >= RECALL, (result, missed)
    assert result.precision >= PRECISION, (result, extra)


def test_every_category_of_the_default_policy_is_in_the_set(
    labelled: tuple[list[dict[str, object]], list[list[str]]],
) -> None:
    cases, _ = labelled
    for category in CATEGORIES:
        assert sum(category in c["categories"] for c in cases) >= 20, category  # type: ignore[operator]
    assert sum(not c["categories"] for c in cases) >= 50  # everyday speech, near misses
