"""`StopStrings`' checks and edges that the mutation run (`tox -e mutants`, docs/contributing.md) found untested,
over a character tokenizer (one character per id; id 0 is a special token that decodes to `<s>`)."""

from __future__ import annotations

import pytest

from agentgym_train.rollout.stops import StopStrings

ALPHABET = ["<s>", *"abcdefghijklmnopqrstuvwxyz:\n "]


class Characters:
    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(ALPHABET[i] for i in ids if not (skip_special_tokens and i == 0))


def ids(text: str) -> list[int]:
    return [ALPHABET.index(c) for c in text]


def test_stop_strings_must_be_non_empty_strings() -> None:
    for bad in ([""], [3], ["ok", ""]):
        with pytest.raises(ValueError, match="stop strings must be non-empty strings"):
            StopStrings(Characters(), bad)
    assert not StopStrings(Characters(), []) and StopStrings(Characters(), ["x"])


def test_no_strings_or_no_ids_never_stop() -> None:
    none, some = StopStrings(Characters(), []), StopStrings(Characters(), ["ab"])
    assert none.cut(ids("xxabxx")) is None and not none.completed(ids("xxab"))
    assert some.cut([]) is None and not some.completed([])
    assert some.completed(ids("xxab")) and not some.completed(ids("xxa"))


def test_a_reply_that_starts_with_the_stop_keeps_nothing() -> None:
    stops = StopStrings(Characters(), ["\nobservation:"])
    assert stops.cut(ids("\nobservation: more")) == 0
    assert stops.cut(ids("go\nobservation: more")) == 2


def test_decoding_keeps_special_tokens() -> None:
    stops = StopStrings(Characters(), ["<s>"])
    assert stops.decode([1, 0]) == "a<s>"
    assert stops.cut([1, 2, 0, 3]) == 2  # the special token's text is a stop string the reply can hold
