"""Deep Search's synthetic encyclopedia: determinism, a fixed test split, questions grounded in the articles."""

from __future__ import annotations

import collections

import pytest

from agentgym_envs.deepsearch import synthetic as S


@pytest.fixture(scope="module")
def small() -> S.SyntheticData:
    return S.generate(num_docs=2_000, seed=3, test_size=200)


def test_same_seed_same_world_other_seed_other_world(small: S.SyntheticData) -> None:
    again = S.generate(num_docs=2_000, seed=3, test_size=200)
    assert again.documents == small.documents and again.questions == small.questions
    other = S.generate(num_docs=2_000, seed=4, test_size=200)
    assert other.documents != small.documents
    assert {q.question for q in other.questions["test"]}.isdisjoint(q.question for q in small.questions["test"])


def test_sizes_kinds_and_titles(small: S.SyntheticData) -> None:
    assert len(small.documents) == 2_000
    assert [d["id"] for d in small.documents] == [str(i) for i in range(2_000)]
    titles = [d["contents"].split("\n", 1)[0] for d in small.documents]
    assert len(set(titles)) == len(titles)  # every article has its own title
    assert all(d["contents"].count("\n") == 1 for d in small.documents)  # title line, then the text
    assert len(small.questions["train"]) == round(S.TRAIN_PER_DOC * 2_000)
    counts = collections.Counter(q.category for q in small.questions["test"])
    assert counts == dict.fromkeys(S.CATEGORIES, 50)  # equal shares per question kind
    texts = [q.question for split in small.questions.values() for q in split]
    assert len(set(texts)) == len(texts)  # no question repeats, nor leaks from train into test


def test_hops_are_stated_by_their_subjects_article(small: S.SyntheticData) -> None:
    articles = {d["contents"].split("\n", 1)[0]: d["contents"] for d in small.documents}
    for question in small.questions["test"] + small.questions["train"][:500]:
        hops = {"single-hop": [1], "bridge": [2], "comparison": [2], "multi-hop": [3, 4]}[question.category]
        assert len(question.chain) in hops
        for hop in question.chain:
            assert hop.subject in articles and hop.value in articles[hop.subject].split("\n", 1)[1]
            assert hop.query.startswith(hop.subject)
        if question.category != "comparison":
            # the chain is a path: each hop's value is the next hop's subject, the last one is the answer
            for hop, following in zip(question.chain, question.chain[1:], strict=False):
                assert hop.value == following.subject
            assert question.chain[-1].value == question.golden_answers[0]
        else:
            assert question.golden_answers[0] in question.question


def test_multi_hop_answers_are_not_in_the_first_article() -> None:
    """Articles state only their own entity's facts, so a 3-4 hop answer is (but for coincidences) elsewhere."""
    data = S.generate(num_docs=1_000, seed=0, test_size=200)
    articles = {d["contents"].split("\n", 1)[0]: d["contents"] for d in data.documents}
    multi = [q for q in data.questions["test"] if q.category == "multi-hop"]
    found = [q.chain[-1].value in articles[q.chain[0].subject] for q in multi]
    assert len(multi) == 50 and sum(found) <= 0.1 * len(multi)


def test_test_split_is_fixed_as_the_corpus_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "BLOCK_DOCS", 400)  # small blocks to keep the test fast
    one = S.generate(num_docs=400, seed=0, test_size=40)
    three = S.generate(num_docs=1_000, seed=0, test_size=40)
    assert len(three.documents) == 1_000
    assert three.questions["test"] == one.questions["test"]
    assert three.documents[:400] == one.documents  # later blocks only add distractors
    assert len(three.questions["train"]) > len(one.questions["train"])


def test_question_json_round_trip(small: S.SyntheticData) -> None:
    for question in small.questions["test"][:20]:
        assert S.Question.from_json(question.to_json()) == question


def test_too_small_a_world_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 100"):
        S.generate(num_docs=10)
