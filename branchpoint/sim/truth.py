"""Ground truth: the exact success probability of every continuation from a saved state.

The simulator's replies depend only on (question, passages shown, effort, sampling) — see
`behaviour` — and retrieval is deterministic given (query, source). So the value of a state under
an agent that follows one of branchpoint's protocols is a finite sum over the simulator's
decisions, queries and answers, computed exactly by recursion (`TruthModel`), memoised on the
passages in hand. The agent graph it mirrors (`branchpoint.agents.graph`):

- `decide` (a policy call) fails with the call's failure probability (chat: one failure fails the
  decision, since a retry repeats the same request and so the same reply; `constrained`: the
  unconstrained call fails and then its grammar retry does too); else it searches with the
  search probability (where the policy offers search and the cap allows) or answers;
- `search` runs the query on the state's source and appends the top-k documents;
- after a search, `decide` again while searches < cap, else the forced answer; a search that adds
  no passage leaves the few-shot completion prompt unchanged, so (same request, same seed, same
  reply) the `constrained` agent repeats that search until the cap and then answers;
- the forced answer is one call without search (chat: its failure probability; `constrained`:
  grammar calls only).

Budget disclosure (`AgentModel.disclosure`) enters only through the searches left the simulator
is told (`AgentModel.searches_left`); a token budget (`agent.token_budget`) is not modelled: the
truth is that of executions without one.

Continuations at a state x with k searches and budget b: THINK / STOP = the forced answer from
x's passages; SEARCH = `decide` with cap k + b (at a pending query: run it first on x's source,
SWITCH: on the other source); `natural` = `decide` from the initial state with the run's cap.
Success = the rule judge's verdict on the simulator's answer (answerable: the gold answer;
unanswerable: an abstention). Every value comes with its expected searches and, under the
completion protocol, its exact expected input and output tokens (`costs`; NaN for chat
protocols, whose transcripts the cost model does not build).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from branchpoint.datasets.questions import Question
from branchpoint.sim.behaviour import answer_probs, call_failure_prob, is_success, query_probs, reshape, search_prob
from branchpoint.sim.costs import CallCost, CompletionCosts
from branchpoint.sim.passages import Passage, distinct, features, shown_passage
from branchpoint.sim.profile import Profile
from branchpoint.sim.question_set import QuestionBank

#: (query, source) -> the documents retrieved, as dicts with doc_id, title, text (top-k applied).
SearchFn = Callable[[str, str], Sequence[Mapping[str, Any]]]

Style = Literal["completion", "native", "tagged", "no_search"]

#: Built-in policies and the protocol the simulator sees from each.
POLICY_STYLES: dict[str, Style] = {
    "constrained": "completion",
    "native": "native",
    "tagged": "tagged",
    "no_search": "no_search",
}


@dataclass(frozen=True)
class AgentModel:
    """What the truth needs to know about the agent: protocol, sampling and limits."""

    style: Style
    temperature: float
    top_p: float = 1.0
    effort: str = "none"  # the effort the simulator sees on chat calls
    max_tokens: int = 48
    answer_max_tokens: int = 48
    malformed_retries: int = 1
    evidence_words: int = 60
    offers_search: bool = True  # the spec offers the search tool (agent.search)
    thinking_budget: int | None = None  # the chat calls' thinking_token_budget (None: none sent)
    #: `agent.budget_disclosure` and the run's search cap it discloses (the simulator reads the
    #: searches left: `behaviour.search_prob`); under a disclosure the completion prompt carries a
    #: `Budget:` line the cost model does not build, so costs are then not modelled (NaN).
    disclosure: str = "hidden"
    shown_cap: int | None = None

    def searches_left(self, k: int, cap: int) -> int | None:
        """The searches left the prompt discloses with k searches done (None: hidden): the
        disclosed cap minus k under `every_step`, the cap itself under `start` (which states only
        the cap); the disclosed cap is the run's, also in a fork branch with its own budget."""
        if self.disclosure == "hidden":
            return None
        shown = self.shown_cap if self.shown_cap is not None else cap
        return shown - k if self.disclosure == "every_step" else shown

    @property
    def chat_effort(self) -> str:
        return "none" if self.style == "completion" else self.effort


@dataclass(frozen=True)
class Value:
    """Success probability of a continuation, its expected searches and tokens (input, output:
    the continuation's own calls; NaN where the cost model does not cover the protocol)."""

    p: float
    searches: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0

    @property
    def tokens(self) -> float:
        return self.input_tokens + self.output_tokens


@dataclass
class TruthModel:
    """Exact values of continuations for one profile, question set, agent and retrieval."""

    profile: Profile
    bank: QuestionBank
    agent: AgentModel
    search: SearchFn
    _memo: dict[Any, Value] = field(default_factory=dict, repr=False)
    _counts_memo: dict[Any, dict[int, float]] = field(default_factory=dict, repr=False)
    _docs: dict[tuple[str, str], list[Passage]] = field(default_factory=dict, repr=False)
    _costs: CompletionCosts | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        a = self.agent
        if a.style == "completion" and a.disclosure == "hidden":
            self._costs = CompletionCosts(
                self.profile,
                a.temperature,
                a.max_tokens,
                a.answer_max_tokens,
                a.malformed_retries,
                a.evidence_words,
                a.offers_search,
            )

    @property
    def costs_modelled(self) -> bool:
        """Whether values carry exact token expectations (the completion protocol)."""
        return self._costs is not None

    # --- one call ------------------------------------------------------------------------------

    def _fail(self, *, constrained: bool, max_tokens: int) -> float:
        a = self.agent
        return call_failure_prob(
            self.profile,
            constrained=constrained,
            effort=a.chat_effort,
            max_tokens=max_tokens,
            temperature=a.temperature,
            budget=None if a.style == "completion" else a.thinking_budget,
        )

    def decide_ok(self) -> float:
        """P(a `decide` call yields a usable decision)."""
        a = self.agent
        first = self._fail(constrained=False, max_tokens=a.max_tokens)
        if a.style == "completion" and a.malformed_retries >= 1:
            return 1.0 - first * self._fail(constrained=True, max_tokens=a.max_tokens)
        return 1.0 - first

    def forced_ok(self) -> float:
        """P(the forced final answer call yields an answer)."""
        a = self.agent
        if a.style == "completion":
            grammar = self._fail(constrained=True, max_tokens=a.answer_max_tokens)
            if not a.offers_search:  # the no-search prompt: unconstrained first, then the grammar
                return 1.0 - self._fail(constrained=False, max_tokens=a.answer_max_tokens) * grammar
            return 1.0 - grammar
        return 1.0 - self._fail(constrained=False, max_tokens=a.answer_max_tokens)

    def answers(self, question: Question, passages: Sequence[Passage]) -> dict[str, float]:
        """Answer text → probability of one (successful) answering call from these passages."""
        a = self.agent
        return reshape(answer_probs(self.profile, question, features(question, passages)), a.temperature, a.top_p)

    def answer_success(self, question: Question, passages: Sequence[Passage]) -> float:
        return sum(p for ans, p in self.answers(question, passages).items() if is_success(question, ans))

    def forced_answers(self, question: Question, passages: Sequence[Passage]) -> dict[str | None, float]:
        """Final answer → probability for the forced answer (None: the call failed)."""
        ok = self.forced_ok()
        out: dict[str | None, float] = {ans: ok * p for ans, p in self.answers(question, passages).items()}
        if ok < 1.0:
            out[None] = out.get(None, 0.0) + (1.0 - ok)
        return out

    # --- the recursion -------------------------------------------------------------------------

    def retrieved(self, query: str, source: str) -> list[Passage]:
        key = (query, source)
        if key not in self._docs:
            self._docs[key] = [shown_passage(d, self.agent.evidence_words) for d in self.search(query, source)]
        return self._docs[key]

    def replays_futile_search(self, passages: tuple[Passage, ...], query: str, source: str) -> bool:
        """True when a search adds no passage and the policy's next prompt is then the same as
        this one: the few-shot completion prompt shows only the passages (chat transcripts grow
        with every search, so their next request differs and draws afresh)."""
        if self.agent.style != "completion" or self.agent.disclosure == "every_step":  # its countdown changes
            return False
        return tuple(distinct([*passages, *self.retrieved(query, source)])) == passages

    def _call_cost(self, question: Question, passages: Sequence[Passage], forced: bool) -> CallCost:
        """The decision's call sequence and its tokens (NaN tokens where costs are not modelled)."""
        if self._costs is not None:
            cc = (self._costs.forced if forced else self._costs.decide)(question.question, passages)
            return cc
        nan = float("nan")
        return CallCost(self.forced_ok() if forced else self.decide_ok(), nan, nan, nan, nan)

    def _reply_tokens(self, kind: str, text: str) -> float:
        return float(self._costs.reply_tokens(kind, text)) if self._costs is not None else float("nan")

    def _answer_tokens(self, answers: Mapping[str, float]) -> float:
        return sum(p * self._reply_tokens("answer", ans) for ans, p in answers.items())

    def forced(self, question: Question, passages: Sequence[Passage]) -> Value:
        cc = self._call_cost(question, passages, forced=True)
        answers = self.answers(question, passages)
        return Value(
            cc.ok * self.answer_success(question, passages),
            0.0,
            (1.0 - cc.ok) * cc.fail_in + cc.ok * cc.ok_in,
            (1.0 - cc.ok) * cc.fail_out + cc.ok * (cc.ok_out + self._answer_tokens(answers)),
        )

    def decide(self, question: Question, passages: tuple[Passage, ...], k: int, cap: int, source: str) -> Value:
        """Value of a `decide` node with k searches done under search cap `cap`."""
        key = ("decide", question.id, frozenset(passages), passages[-1:], k, cap, source)
        if key in self._memo:
            return self._memo[key]
        cc = self._call_cost(question, passages, forced=False)
        ok = cc.ok
        answers = self.answers(question, passages)
        answer = self.answer_success(question, passages)
        ps = self.search_choice(question, passages, k, cap)
        # given a usable reply: P(success), E[searches], E[input / output tokens after the calls]
        p = (1.0 - ps) * answer
        searches = 0.0
        t_in, t_out = 0.0, (1.0 - ps) * self._answer_tokens(answers)
        if ps > 0:
            for query, pq in self.queries(question, passages).items():
                w = ps * pq
                reply = self._reply_tokens("search", query)
                if self.replays_futile_search(passages, query, source):
                    # Nothing new: the next prompt is this one again and, with the same seed,
                    # so is the reply (and the calls before it): it searches the same query until
                    # the cap, then answers.
                    end = self.forced(question, passages)
                    p += w * end.p
                    searches += w * (cap - k)
                    t_in += w * ((cap - k - 1) * cc.ok_in + end.input_tokens)
                    t_out += w * (reply + (cap - k - 1) * (cc.ok_out + reply) + end.output_tokens)
                    continue
                after = self.after_search(question, passages, query, k, cap, source)
                p += w * after.p
                searches += w * (1.0 + after.searches)
                t_in += w * after.input_tokens
                t_out += w * (reply + after.output_tokens)
        value = Value(
            ok * p,
            ok * searches,
            (1.0 - ok) * cc.fail_in + ok * (cc.ok_in + t_in),
            (1.0 - ok) * cc.fail_out + ok * (cc.ok_out + t_out),
        )
        self._memo[key] = value
        return value

    def search_choice(self, question: Question, passages: tuple[Passage, ...], k: int, cap: int) -> float:
        """P(a usable decision with k searches done under cap `cap` is to search)."""
        a = self.agent
        if a.style == "no_search" or not a.offers_search or k >= cap:
            return 0.0
        f = features(question, passages)
        p_search = search_prob(self.profile, question, f, a.chat_effort, a.searches_left(k, cap))
        return reshape({"search": p_search, "answer": 1.0 - p_search}, a.temperature, a.top_p).get("search", 0.0)

    def queries(self, question: Question, passages: tuple[Passage, ...]) -> dict[str, float]:
        """The query a search decision writes → its probability."""
        a = self.agent
        return reshape(query_probs(self.profile, question.question, list(passages)), a.temperature, a.top_p)

    def first_decision(self, question: Question, search_cap: int) -> tuple[float, float]:
        """(P(the first decision of an execution is to search), P(it is to answer, with a usable
        reply)): the rest, 1 minus both, is a failed first call (no decision recorded)."""
        ok = self._call_cost(question, (), forced=False).ok
        ps = self.search_choice(question, (), 0, search_cap)
        return ok * ps, ok * (1.0 - ps)

    def search_counts(self, question: Question, search_cap: int, source: str) -> dict[int, float]:
        """The distribution of a whole execution's search count, k → P(k searches), k = 0 … cap:
        the recursion of `decide` over the same draws (a failed decision ends the execution with
        the searches made; a futile search is repeated until the cap)."""
        return self._counts(question, (), 0, search_cap, source)

    def _counts(
        self, question: Question, passages: tuple[Passage, ...], k: int, cap: int, source: str
    ) -> dict[int, float]:
        key = ("counts", question.id, frozenset(passages), passages[-1:], k, cap, source)
        if key in self._counts_memo:
            return self._counts_memo[key]
        ok = self._call_cost(question, passages, forced=False).ok
        ps = self.search_choice(question, passages, k, cap)
        out: dict[int, float] = {k: (1.0 - ok) + ok * (1.0 - ps)}
        if ps > 0:
            for query, pq in self.queries(question, passages).items():
                w = ok * ps * pq
                if self.replays_futile_search(passages, query, source) or k + 1 >= cap:
                    out[cap] = out.get(cap, 0.0) + w
                    continue
                new = tuple(distinct([*passages, *self.retrieved(query, source)]))
                for n, pn in self._counts(question, new, k + 1, cap, source).items():
                    out[n] = out.get(n, 0.0) + w * pn
        self._counts_memo[key] = out
        return out

    def after_search(
        self, question: Question, passages: tuple[Passage, ...], query: str, k: int, cap: int, source: str
    ) -> Value:
        """Value after running `query` on `source` (k searches before it)."""
        new = tuple(distinct([*passages, *self.retrieved(query, source)]))
        if k + 1 < cap:
            return self.decide(question, new, k + 1, cap, source)
        return self.forced(question, new)

    # --- continuations of a saved state ----------------------------------------------------------

    def question_of(self, state: Mapping[str, Any]) -> Question:
        q = self.bank.lookup(state.get("question") or "")
        if q is None:
            raise KeyError(f"question not in the simulator's question set: {state.get('question')!r}")
        return q

    def passages_of(self, state: Mapping[str, Any]) -> tuple[Passage, ...]:
        return tuple(distinct(shown_passage(d, self.agent.evidence_words) for d in state.get("evidence") or []))

    def continuation(
        self, state: Mapping[str, Any], action: str, *, search_budget: int = 3, switch_source: str | None = None
    ) -> Value:
        """The exact value of THINK / SEARCH / STOP / SWITCH from a saved state (its channel values)."""
        question = self.question_of(state)
        passages = self.passages_of(state)
        k = int(state.get("searches") or 0)
        source = state.get("source") or ""
        pending = state.get("pending") or {}
        at_pending = state.get("boundary") == "pending_query" and pending.get("action") == "search"
        if action in ("THINK", "STOP"):
            return self.forced(question, passages)
        if action not in ("SEARCH", "SWITCH"):
            raise ValueError(f"unknown action {action!r}")
        cap = k + search_budget
        if at_pending:
            if action == "SWITCH" and not switch_source:
                raise ValueError("SWITCH needs switch_source")
            run_on = str(switch_source) if action == "SWITCH" else str(source)
            after = self.after_search(question, passages, pending.get("text") or "", k, cap, run_on)
            return Value(after.p, 1.0 + after.searches, after.input_tokens, after.output_tokens)
        if action == "SWITCH":
            raise ValueError("SWITCH is legal only at a pending query")
        return self.decide(question, passages, k, cap, source)

    def natural(self, question: Question, search_cap: int, source: str) -> Value:
        """The value of a whole execution from the initial state (what a run scores)."""
        return self.decide(question, (), 0, search_cap, source)

    def think_answers(self, state: Mapping[str, Any]) -> dict[str | None, float]:
        """The THINK continuation's final answers and their probabilities (None: failed)."""
        return self.forced_answers(self.question_of(state), self.passages_of(state))
