"""Answer scoring as in SQuAD, Search-R1 and FlashRAG: exact match and token F1 after normalisation.

>>> normalize_answer("The  Eiffel-Tower!")
'eiffeltower'
>>> exact_match("the Beatles", ["Beatles", "The Fab Four"])
1.0
>>> round(f1_score("Lima, Peru", ["Lima"]), 3)
0.667
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _tokens(text: str) -> list[str]:
    return _ARTICLES.sub(" ", text.lower().translate(_NO_PUNCTUATION)).split()


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles (a, an, the), single spaces."""
    return " ".join(_tokens(text))


def exact_match(prediction: str, golden_answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0."""
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(gold) for gold in golden_answers))


def _f1(predicted: Counter[str], predicted_count: int, gold: list[str]) -> float:
    # Over the gold tokens only: a long prediction costs one pass (in f1_score), not one per gold answer.
    common = sum(min(count, predicted[token]) for token, count in Counter(gold).items())
    if common == 0:
        return 0.0
    precision, recall = common / predicted_count, common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golden_answers: Iterable[str]) -> float:
    """The best token-level F1 between the normalised prediction and any normalised gold answer."""
    return score_answer(prediction, golden_answers)[1]


def score_answer(prediction: str, golden_answers: Iterable[str]) -> tuple[float, float]:
    """Exact match and F1 of `prediction` against the gold answers, normalising the prediction once.

    >>> score_answer("Lima, Peru", ["Lima"])
    (0.0, 0.6666666666666666)
    """
    tokens = _tokens(prediction)
    predicted, counts = " ".join(tokens), Counter(tokens)
    golds = [_tokens(gold) for gold in golden_answers]
    em = float(any(" ".join(gold) == predicted for gold in golds))
    return em, max((_f1(counts, len(tokens), gold) for gold in golds), default=0.0)
