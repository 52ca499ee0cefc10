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
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles (a, an, the), single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golden_answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0."""
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(gold) for gold in golden_answers))


def _f1(predicted: list[str], gold: list[str]) -> float:
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golden_answers: Iterable[str]) -> float:
    """The best token-level F1 between the normalised prediction and any normalised gold answer."""
    predicted = normalize_answer(prediction).split()
    return max((_f1(predicted, normalize_answer(gold).split()) for gold in golden_answers), default=0.0)
