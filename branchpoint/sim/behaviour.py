"""The simulated model's behaviour: a documented, seeded stochastic function of what it is shown.

What it reads from a request (`observe`, in `branchpoint.sim.observe`):
- the question (the last user turn of a chat that is not search results or an instruction; the
  last `Question:` block of a few-shot completion prompt), looked up by its text in the question
  set the server was given (`question_set.QuestionBank`): gold answers, answerability, category;
- the passages shown (chat: `Doc i(Title: t) text` lines in tool results or `<information>`;
  completion: the `[i] "Title" text` items of the last `Evidence:` line), distinct by
  (title, text);
- the searches left that the request discloses (`observe.disclosed_left`; None when hidden);
- whether it may search (chat: a `search` tool offered, or the tagged-text system prompt with
  `<search>`; completion: the search header of the few-shot prompt, and a grammar that allows
  `search`), whether output is constrained (a grammar or structured output: never malformed),
  and its reasoning effort (`reasoning_effort`; `chat_template_kwargs.enable_thinking`; else the
  profile's default; completions never reason).

What it computes from them (`passages.Features`): a gold-bearing passage is shown (a gold answer
occurs in a shown passage's title or text, folded: `matching.holds_gold`), and the counts of
negative passages (the simulated world's lexical cues of uncertainty, `matching.negative_cue`,
which agree with the rule judge's evidence cues on the demo corpus) and positive ones (all other
passages). The distributions (`search_prob`, `query_probs`, `answer_probs`) are functions of
(question, these features, effort) only, which is what makes the truth computable
(`branchpoint.sim.truth`):

- answer: answerable → correct with 1 − (1 − prior_q)(1 − lift·gold); the rest abstains with
  σ(a_ans + n_neg·w_neg + n_pos·w_pos), else one of four wrong answers (equally likely).
  Unanswerable → abstains with σ(a_category + n_neg·w_neg + n_pos·w_pos), else a wrong answer.
- search (when allowed): σ(base + effort + unanswerable + gold·gold_shown + n·per_passage
  [+ scarcity / left where the request discloses `left` searches left: `agent.budget_disclosure`'s
  countdown, or the cap its `start` text states; nothing when the budget is hidden]).
- query: the question itself with `direct_query`, else the last shown passage's title followed
  by the question (with no passage shown: the question followed by "facts").

Sampling: each categorical is reshaped by the request's temperature (p^(1/T), T = 0 takes the
most probable outcome) and `top_p` (nucleus: the smallest most-probable set whose mass reaches
top_p, renormalised) (`reshape`). Failures per call (none at temperature 0): malformed with
`failures.malformed` unless constrained; cut off (`finish_reason: length`, no content) with
`failures.length`, or when the reasoning drawn (uniform on the effort's [lo, hi]; the midpoint
at temperature 0; capped by the request's `thinking_token_budget`) exceeds max_tokens −
content_reserve. Random numbers come from a generator seeded by a hash of the request body (its
`seed` included), so a request with a seed, or at temperature 0, always gets the same reply;
without a seed, from the server's own generator.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from branchpoint.agents.protocols import JSON_DECISION_PREFIX
from branchpoint.datasets.questions import Question
from branchpoint.sim.matching import holds_gold, same_answer
from branchpoint.sim.passages import Features, Passage, distinct, features
from branchpoint.sim.profile import Profile
from branchpoint.sim.tokens import reasoning_text

if TYPE_CHECKING:
    from branchpoint.sim.observe import Observation

#: Wrong answers the model gives (none contains an abstention cue); one is dropped if it holds a gold.
WRONG_ANSWERS: tuple[str, ...] = ("Halvard Brenning", "Ostrava Minor", "Teodor Wilkes", "Marisol Dunleavy")

#: Abstentions by category (each matches the rule judge's abstention patterns).
ABSTAIN_TEXT: dict[str | None, str] = {
    "AU": "I don't know: nobody can know that yet.",
    "FP": "The premise is false, so there is no such answer.",
    "UC": "Which one do you mean? Please specify.",
    None: "I don't know.",
}

REFINED_SUFFIX = "facts"

#: Request fields that ask for token log probabilities: left out of the draws' seed.
LOGPROB_FIELDS: tuple[str, ...] = ("logprobs", "top_logprobs")

#: What a malformed reply says (no protocol parses it).
MALFORMED_TEXT = "Let me think about how to"


def sigmoid(x: float) -> float:
    """The logistic function: a logit as a probability."""
    return 1.0 / (1.0 + math.exp(-x))


# --------------------------------------------------------------------------------------------
# Distributions
# --------------------------------------------------------------------------------------------


def _unit_hash(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8]) / 2**64


def prior(profile: Profile, question: Question) -> float:
    """P(correct) without a gold-bearing passage: the per-question prior, or one fixed by the id."""
    k = profile.knowledge
    if question.id in k.priors:
        return k.priors[question.id]
    return min(1.0, max(0.0, k.prior + k.prior_spread * (_unit_hash(question.id) - 0.5)))


def wrong_answers(question: Question | None) -> list[str]:
    gold = question.gold_answers if question is not None else []
    return [w for w in WRONG_ANSWERS if not (gold and holds_gold(w, gold))]


def abstain_text(question: Question | None) -> str:
    if question is None or question.answerable:
        return ABSTAIN_TEXT[None]
    return ABSTAIN_TEXT.get(question.category, ABSTAIN_TEXT[None])


def answer_probs(profile: Profile, question: Question | None, f: Features) -> dict[str, float]:
    """Answer text → probability at temperature 1 (see the module docstring)."""
    ab = profile.abstention
    evidence = f.n_neg * ab.per_negative + f.n_pos * ab.per_positive
    wrong = wrong_answers(question)
    out: dict[str, float] = {}
    if question is not None and question.answerable:
        pc = 1.0 - (1.0 - prior(profile, question)) * (1.0 - profile.knowledge.gold_lift * f.gold)
        a = (1.0 - pc) * sigmoid(ab.answerable + evidence)
        out[question.gold_answers[0] if question.gold_answers else "yes"] = pc
    else:
        logit = ab.unanswerable.get(question.category or "AU", 0.0) if question is not None else 0.0
        a = sigmoid(logit + evidence)
        pc = 0.0
    out[abstain_text(question)] = out.get(abstain_text(question), 0.0) + a
    for w in wrong:
        out[w] = (1.0 - pc - a) / len(wrong)
    return out


def is_success(question: Question | None, answer: str | None) -> bool:
    """Whether an answer is a success in the simulated world: its correct answer (the first gold
    answer, folded: `matching.same_answer`) on an answerable question, its abstention on an
    unanswerable one. The simulator's own rule, independent of any judge."""
    if question is None or answer is None:
        return False
    if question.answerable:
        return bool(question.gold_answers) and same_answer(answer, question.gold_answers[0])
    return answer == abstain_text(question)


def search_prob(
    profile: Profile, question: Question | None, f: Features, effort: str, searches_left: int | None = None
) -> float:
    """P(SEARCH) at temperature 1 when searching is allowed; `searches_left` is the number of
    searches the request says are left (None: no budget disclosed), adding `scarcity / left`."""
    s = profile.search
    unanswerable = question is not None and not question.answerable
    logit = (
        s.base + s.effort.get(effort, 0.0) + s.unanswerable * unanswerable + s.gold_shown * f.gold + s.per_passage * f.n
    )
    if searches_left is not None and searches_left > 0:
        logit += s.scarcity / searches_left
    return sigmoid(logit)


def query_probs(profile: Profile, question_text: str, passages: list[Passage]) -> dict[str, float]:
    """Query text → probability at temperature 1."""
    shown = distinct(passages)
    refined = (
        f"{shown[-1].title or ' '.join(shown[-1].text.split()[:4])} {question_text}"
        if shown
        else (f"{question_text} {REFINED_SUFFIX}")
    )
    d = profile.search.direct_query
    out = {question_text: d}
    out[refined] = out.get(refined, 0.0) + (1.0 - d)
    return out


def reshape(probs: Mapping[str, float], temperature: float, top_p: float = 1.0) -> dict[str, float]:
    """The categorical a sampler with `temperature` and `top_p` draws from (T = 0: the argmax)."""
    items = [(k, float(v)) for k, v in probs.items() if v > 0]
    if not items:
        return {}
    if temperature <= 0:
        best = max(items, key=lambda kv: kv[1])[0]  # first of the most probable on ties
        return {best: 1.0}
    if temperature != 1.0:
        logs = np.array([math.log(v) / temperature for _, v in items])
        w = np.exp(logs - logs.max())
        items = [(k, float(x)) for (k, _), x in zip(items, w / w.sum())]
    total = sum(v for _, v in items)
    items = [(k, v / total) for k, v in items]
    if top_p < 1.0:
        ranked = sorted(items, key=lambda kv: -kv[1])
        kept, mass = [], 0.0
        for k, v in ranked:
            kept.append((k, v))
            mass += v
            if mass >= top_p - 1e-12:
                break
        keep = {k for k, _ in kept}
        items = [(k, v / mass) for k, v in items if k in keep]
    return dict(items)


def reasoning_range(profile: Profile, effort: str) -> tuple[int, int]:
    lo, hi = profile.tokens.reasoning.get(effort, (0, 0))
    return int(lo), int(hi)


def length_overflow_prob(
    profile: Profile, effort: str, max_tokens: int, temperature: float, budget: int | None = None
) -> float:
    """P(the reasoning drawn leaves no room for content under `max_tokens`); a thinking-token
    `budget` caps the reasoning, so at or under the room it never overflows."""
    lo, hi = reasoning_range(profile, effort)
    room = max(max_tokens - profile.tokens.content_reserve, 0)
    if budget is not None and budget <= room:
        return 0.0
    if temperature <= 0:
        return float((lo + hi) // 2 > room)
    over = max(0, hi - max(room, lo - 1))
    return over / (hi - lo + 1)


def call_failure_parts(
    profile: Profile,
    *,
    constrained: bool,
    effort: str,
    max_tokens: int,
    temperature: float,
    budget: int | None = None,
) -> tuple[float, float]:
    """(P(malformed), P(cut off)) of one call: malformed is drawn first (never constrained, never
    at temperature 0), then a cut-off (`failures.length`, or reasoning past the room left)."""
    overflow = length_overflow_prob(profile, effort, max_tokens, temperature, budget)
    if temperature <= 0:
        return 0.0, overflow
    malformed = 0.0 if constrained else profile.failures.malformed
    length = profile.failures.length
    return malformed, (1.0 - malformed) * (length + (1.0 - length) * overflow)


def call_failure_prob(
    profile: Profile,
    *,
    constrained: bool,
    effort: str,
    max_tokens: int,
    temperature: float,
    budget: int | None = None,
) -> float:
    """P(one call fails: malformed, or cut off) (see the module docstring)."""
    return sum(
        call_failure_parts(
            profile,
            constrained=constrained,
            effort=effort,
            max_tokens=max_tokens,
            temperature=temperature,
            budget=budget,
        )
    )


# --------------------------------------------------------------------------------------------
# Drawing a reply
# --------------------------------------------------------------------------------------------


_LEFT_OUT = object()


def _not_asking_logprobs(body: Mapping[str, Any]) -> dict[str, Any]:
    """The log-probability fields of `body` as the same request asking for none sends them, so
    that asking changes nothing drawn (as in vLLM): a chat request's `logprobs: true` and
    `top_logprobs` are left out (chat clients send neither), a completion's `logprobs: N` reads
    as `logprobs: null` (what OpenAI's completion clients, langchain-openai's among them, send)."""
    out: dict[str, Any] = {}
    for k in LOGPROB_FIELDS:
        v = body.get(k)
        if v is None or v is False:
            continue  # asks for nothing: kept as sent
        completion = k == "logprobs" and isinstance(v, int) and not isinstance(v, bool)
        out[k] = None if completion else _LEFT_OUT
    return out


def request_rng(body: Mapping[str, Any], fallback: np.random.Generator) -> np.random.Generator:
    """A generator seeded by the request body (its seed included): the same request, the same draws
    (whether or not it asks for log probabilities).

        Without a seed at temperature > 0 the server's own generator is used (not reproducible).
    """
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    if body.get("seed") is None and temperature > 0:
        return np.random.default_rng(fallback.integers(2**63))
    material = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "user")}
    material.update(_not_asking_logprobs(body))
    for k in [k for k, v in material.items() if v is _LEFT_OUT]:
        del material[k]
    digest = hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16]))


def draw(rng: np.random.Generator, probs: Mapping[str, float]) -> str:
    """One draw from a categorical (keys in their given order)."""
    keys = list(probs)
    u = rng.random()
    acc = 0.0
    for k in keys:
        acc += probs[k]
        if u < acc:
            return k
    return keys[-1]


@dataclass
class Reply:
    """What the model "generated": an action or a failure, its texts and token counts."""

    kind: Literal["search", "answer", "malformed", "length", "text"]
    text: str = ""
    reasoning: str | None = None
    reasoning_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def sampling(body: Mapping[str, Any]) -> tuple[float, float]:
    t = body.get("temperature")
    p = body.get("top_p")
    return (1.0 if t is None else float(t)), (1.0 if p is None else float(p))


def generate(
    profile: Profile, obs: Observation, body: Mapping[str, Any], rng: np.random.Generator, max_tokens: int
) -> Reply:
    """Draw one reply to an observed request (see the module docstring for every rule)."""
    temperature, top_p = sampling(body)
    lo, hi = reasoning_range(profile, obs.effort)
    n_reason = (lo + hi) // 2 if temperature <= 0 else int(rng.integers(lo, hi + 1))
    if obs.thinking_budget is not None:  # vLLM ends the reasoning once the budget is spent
        n_reason = min(n_reason, obs.thinking_budget)
    reasoning = reasoning_text(n_reason) if n_reason > 0 else None
    u_malformed, u_length = rng.random(), rng.random()
    room = max(max_tokens - profile.tokens.content_reserve, 0)
    malformed = temperature > 0 and not obs.constrained and u_malformed < profile.failures.malformed
    if not malformed and (n_reason > room or (temperature > 0 and u_length < profile.failures.length)):
        cut = max(0, min(n_reason, max_tokens))
        return Reply("length", "", reasoning_text(cut) if cut else None, cut)
    if malformed:
        return Reply("malformed", MALFORMED_TEXT, reasoning, n_reason)
    f = features(obs.question, obs.passages)
    answers = reshape(answer_probs(profile, obs.question, f), temperature, top_p)
    if obs.task == "self_eval":
        answer = draw(rng, answers)
        abstains = answer == abstain_text(obs.question)
        return Reply("text", f"ABSTAIN: {answer}" if abstains else "ANSWERABLE", reasoning, n_reason)
    if obs.can_search:
        p = search_prob(profile, obs.question, f, obs.effort, obs.searches_left)
        decision = (
            "search" if obs.tool_required else draw(rng, reshape({"search": p, "answer": 1 - p}, temperature, top_p))
        )
        if decision == "search":
            query = draw(rng, reshape(query_probs(profile, obs.question_text, obs.passages), temperature, top_p))
            return Reply("search", query, reasoning, n_reason)
    return Reply("answer", draw(rng, answers), reasoning, n_reason)


def completion_text(reply: Reply) -> str:
    """The continuation of a few-shot prompt that ends with JSON_DECISION_PREFIX."""
    if reply.kind in ("search", "answer"):
        return f'{reply.kind}", "text": {json.dumps(reply.text)}}}'
    if reply.kind == "length":
        return ""
    return reply.text  # malformed: no valid JSON follows the prefix


assert JSON_DECISION_PREFIX.endswith('"'), "completion_text continues a JSON string"
