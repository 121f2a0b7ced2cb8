"""Exact token costs of the few-shot completion protocol, for the truth (`truth.TruthModel`).

A branch's cost is its own input + output tokens (`evaluation.value.outcomes`), and a run's
TPC sums them over executions. Under the completion protocol (the `constrained` policy and
policies built on `fewshot_decision`) every request is a deterministic function of the node
of the truth's recursion: the prompt is `prompts.fewshot_prompt(question, passages shown,
offered)` — its token count is `count_tokens` of it, as the server counts it — and a reply's
tokens are those of `behaviour.completion_text`. So the expected cost of every continuation is
exact, like its success probability.

One *decision* is a call sequence (`agents.policies.fewshot_decision`):

- a policy decision: one unconstrained call; if it does not parse (malformed, or cut off), the
  grammar retries (`malformed_retries` of them; each repeats the same request, so after one
  failed grammar call all fail);
- a forced answer where search is offered: grammar calls only (`malformed_retries + 1`, the same
  request each time); where no search is offered: as a policy decision.

`CallCost` gives P(a usable reply), the expected tokens spent on the way to it (excluding the
reply's own tokens, which depend on the reply), and the expected tokens of a failed decision.
Chat transcripts (native, tagged) are not modelled here: their cost is NaN (unknown), and the
quantities that need it are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from branchpoint.agents import prompts
from branchpoint.sim.behaviour import MALFORMED_TEXT, Reply, call_failure_parts, completion_text
from branchpoint.sim.passages import Passage
from branchpoint.sim.profile import Profile
from branchpoint.sim.tokens import count_tokens


@dataclass(frozen=True)
class CallCost:
    """One decision's call sequence: P(usable reply); E[input, output tokens | usable] before
    the reply's own tokens; E[input, output tokens | failed]."""

    ok: float
    ok_in: float
    ok_out: float
    fail_in: float
    fail_out: float


def sequence_cost(
    prompt: float,
    *,
    first: tuple[float, float] | None,
    grammar_fail: float,
    grammar_calls: int,
    malformed_tokens: float,
) -> CallCost:
    """The cost of one call sequence: an optional unconstrained first call with failure parts
    `first` = (P(malformed), P(cut off)), then `grammar_calls` identical grammar calls (each
    cut off with `grammar_fail`; identical requests get identical replies)."""
    if first is None:
        n = max(grammar_calls, 1)
        return CallCost(1.0 - grammar_fail, prompt, 0.0, n * prompt, 0.0)
    m1, l1 = first
    f1 = m1 + l1
    mal_share = m1 / f1 if f1 > 0 else 0.0
    if grammar_calls <= 0:
        return CallCost(1.0 - f1, prompt, 0.0, prompt, mal_share * malformed_tokens)
    ok = (1.0 - f1) + f1 * (1.0 - grammar_fail)
    ok_in = ((1.0 - f1) * prompt + f1 * (1.0 - grammar_fail) * 2 * prompt) / ok if ok > 0 else math.nan
    ok_out = m1 * (1.0 - grammar_fail) * malformed_tokens / ok if ok > 0 else math.nan
    return CallCost(ok, ok_in, ok_out, (1 + grammar_calls) * prompt, mal_share * malformed_tokens)


@dataclass
class CompletionCosts:
    """Token costs of the completion protocol's decisions at a node (question, passages shown)."""

    profile: Profile
    temperature: float
    max_tokens: int
    answer_max_tokens: int
    malformed_retries: int
    evidence_words: int
    offers_search: bool
    _prompts: dict[tuple[str, frozenset[Passage], bool], int] = field(default_factory=dict, repr=False)

    def prompt_tokens(self, question: str, passages: Sequence[Passage], offered: bool) -> int:
        """Tokens of the few-shot prompt showing these passages (what the server counts)."""
        key = (question, frozenset(passages), offered)
        if key not in self._prompts:
            docs = [{"doc_id": str(i), "title": p.title, "text": p.text} for i, p in enumerate(passages)]
            text = prompts.fewshot_prompt(question, docs, offered, self.evidence_words)
            self._prompts[key] = count_tokens(text)
        return self._prompts[key]

    @staticmethod
    def reply_tokens(kind: str, text: str) -> int:
        """Completion tokens of a usable reply (`search` with its query, `answer` with its text)."""
        return count_tokens(completion_text(Reply(kind, text)))  # type: ignore[arg-type]

    def _parts(self, constrained: bool, max_tokens: int) -> tuple[float, float]:
        return call_failure_parts(
            self.profile, constrained=constrained, effort="none", max_tokens=max_tokens, temperature=self.temperature
        )

    def _malformed(self) -> float:
        return float(count_tokens(completion_text(Reply("malformed", MALFORMED_TEXT))))

    def decide(self, question: str, passages: Sequence[Passage]) -> CallCost:
        """A policy decision with search allowed (the search prompt, grammar on a parse failure)."""
        return sequence_cost(
            self.prompt_tokens(question, passages, True),
            first=self._parts(False, self.max_tokens),
            grammar_fail=self._parts(True, self.max_tokens)[1],
            grammar_calls=self.malformed_retries,
            malformed_tokens=self._malformed(),
        )

    def forced(self, question: str, passages: Sequence[Passage]) -> CallCost:
        """The forced final answer (grammar only where search is offered)."""
        limit = self.answer_max_tokens
        grammar = self._parts(True, limit)[1]
        if self.offers_search:
            return sequence_cost(
                self.prompt_tokens(question, passages, True),
                first=None,
                grammar_fail=grammar,
                grammar_calls=self.malformed_retries + 1,
                malformed_tokens=0.0,
            )
        return sequence_cost(
            self.prompt_tokens(question, passages, False),
            first=self._parts(False, limit),
            grammar_fail=grammar,
            grammar_calls=self.malformed_retries,
            malformed_tokens=self._malformed(),
        )
