"""The Deep Search expert: one search per hop of the question's chain, then the answer.

It trusts only what it reads: after each search it checks that the passage of the hop's subject
(the document titled with it) was retrieved and states the hop's fact. If any hop's fact was not
found it answers "unknown" and fails, so its success rate on a split is the share of questions whose
every hop is retrievable in the top k with a sensible query.

Questions from user QA files have no chain: the expert searches the question once and answers the
first gold answer (an oracle for demonstrations, not a proof of retrievability).
"""

from __future__ import annotations

import re
from typing import Any

from agentgym_envs.deepsearch.synthetic import Hop, Question

_DOC = re.compile(r"Doc \d+\(Title: ")


def retrieved(observation: str, hop: Hop) -> bool:
    """Whether `observation` holds the passage titled `hop.subject` and it states `hop.value`."""
    body = observation.removeprefix("<information>").removesuffix("</information>")
    return any(
        doc.startswith(hop.subject + ") ") and hop.value in doc[len(hop.subject) + 2 :] for doc in _DOC.split(body)
    )


class DeepSearchExpert:
    """Scripted solver for the current question (create it right after `reset`)."""

    def __init__(self, question: Question):
        self.question = question
        self._searched = 0
        self._all_found = True

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next action: `<search> query </search>` per hop, then `<answer> answer </answer>`."""
        chain = self.question.chain
        if not chain:
            if self._searched == 0:
                self._searched = 1
                return f"<search> {self.question.question} </search>"
            return f"<answer> {self.question.golden_answers[0]} </answer>"
        if self._searched > 0 and not retrieved(observation, chain[self._searched - 1]):
            self._all_found = False
        if self._searched < len(chain):
            self._searched += 1
            return f"<search> {chain[self._searched - 1].query} </search>"
        return f"<answer> {self.question.golden_answers[0] if self._all_found else 'unknown'} </answer>"
