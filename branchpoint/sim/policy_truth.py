"""Truth for any policy on the completion endpoint, by running the policy's own code.

`truth.TruthModel` mirrors branchpoint's protocols: it assumes the agent does what the model
says. A user's policy (`module:function`) may not: it may refuse a second search, rewrite the
query, or answer where the model asked to search. `PolicyTruth` makes no such assumption. At
every node of the agent graph (`agents.graph`: decide → search → decide … → answer) it calls
the policy's decide node (or its forced answer) with a model client that does not sample but
*enumerates*: each request the policy makes is answered, in turn, with every reply the simulator
could give it (`completion_replies`, the distribution `behaviour.generate` draws from), each
with its probability, by re-running the policy with a longer script of replies (depth-first).
So the value of a state is the exact expectation over the simulator's replies of what this
policy's code does with them: its success probability, searches and tokens.

Identical requests get identical replies, as on the server (the reply is seeded by the request
body and the execution's seed): a request made again along a path, in the same decision or
after a search that added nothing, is answered from the path's `seen` replies, not drawn anew.

Scope: completion requests (`ModelClient.complete`); a policy that calls `chat` raises
`UnsupportedPolicy` (chat policies' truth is `TruthModel`'s, which assumes they follow the model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from branchpoint.agents.policies import Policy, decided_answer
from branchpoint.agents.state import AgentContext
from branchpoint.datasets.questions import Question
from branchpoint.models.call import ModelCall
from branchpoint.models.server_kind import structured_output_fields
from branchpoint.sim.behaviour import (
    MALFORMED_TEXT,
    Reply,
    answer_probs,
    call_failure_parts,
    completion_text,
    is_success,
    query_probs,
    reshape,
    search_prob,
)
from branchpoint.sim.observe import observe_completion
from branchpoint.sim.passages import Passage, distinct, features, shown_passage
from branchpoint.sim.profile import Profile
from branchpoint.sim.question_set import QuestionBank
from branchpoint.sim.tokens import count_tokens
from branchpoint.sim.truth import AgentModel, SearchFn, Value
from branchpoint.sim.vllm_rules import apply_stop
from branchpoint.traces import BOUNDARY_PENDING, Usage


class UnsupportedPolicy(RuntimeError):
    """The policy made a request the enumeration does not cover (a chat request)."""


@dataclass(frozen=True)
class Out:
    """One reply of the simulator to a completion request: text, finish reason, tokens."""

    text: str
    finish: str
    prompt_tokens: int
    completion_tokens: int


RequestKey = tuple[str, str | None, int | None, tuple[str, ...]]


def completion_replies(
    profile: Profile, bank: QuestionBank, agent: AgentModel, key: RequestKey
) -> list[tuple[float, Out]]:
    """Every reply to one completion request with its probability (`behaviour.generate`)."""
    prompt, grammar, max_tokens, stop = key
    # the grammar as branchpoint sends it to a vLLM server, which the simulator is (`/version`)
    body: dict[str, Any] = {"prompt": prompt, **(structured_output_fields("vllm", grammar) if grammar else {})}
    obs = observe_completion(profile, bank, body)
    p_in = count_tokens(prompt)
    limit = max_tokens if max_tokens is not None else 16
    malformed, length = call_failure_parts(
        profile, constrained=obs.constrained, effort="none", max_tokens=limit, temperature=agent.temperature
    )

    def out(reply: Reply, finish: str = "stop") -> Out:
        text, _ = apply_stop(completion_text(reply), list(stop), False)
        return Out(text, finish, p_in, count_tokens(text))

    replies: list[tuple[float, Out]] = []
    if malformed > 0:
        replies.append((malformed, out(Reply("malformed", MALFORMED_TEXT))))
    if length > 0:
        replies.append((length, Out("", "length", p_in, 0)))
    ok = 1.0 - malformed - length
    t, top_p = agent.temperature, agent.top_p
    f = features(obs.question, obs.passages)
    answers = reshape(answer_probs(profile, obs.question, f), t, top_p)
    ps = 0.0
    if obs.can_search:
        p = search_prob(profile, obs.question, f, obs.effort)
        ps = reshape({"search": p, "answer": 1.0 - p}, t, top_p).get("search", 0.0)
        for query, pq in reshape(query_probs(profile, obs.question_text, obs.passages), t, top_p).items():
            replies.append((ok * ps * pq, out(Reply("search", query))))
    for ans, pa in answers.items():
        replies.append((ok * (1.0 - ps) * pa, out(Reply("answer", ans))))
    return [(p, o) for p, o in replies if p > 0]


class _Branch(Exception):
    def __init__(self, key: RequestKey) -> None:
        self.key = key


@dataclass
class EnumeratingClient:
    """A `ModelClient` that answers new requests from a script and raises `_Branch` past it."""

    script: list[Out]
    initial: Mapping[RequestKey, Out]
    name: str = "branchpoint-sim-truth"
    pos: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seen: dict[RequestKey, Out] = field(init=False)
    deps: Deps = field(init=False)

    def __post_init__(self) -> None:
        self.seen = dict(self.initial)
        self.deps = Deps({}, set())

    def complete(
        self, prompt: str, *, stop: list[str] | None = None, grammar: str | None = None, max_tokens: int | None = None
    ) -> ModelCall:
        key: RequestKey = (prompt, grammar, max_tokens, tuple(stop or ()))
        if key in self.initial:
            self.deps.hits[key] = self.initial[key]
        elif key not in self.seen:
            self.deps.misses.add(key)
            if self.pos >= len(self.script):
                raise _Branch(key)
            self.seen[key] = self.script[self.pos]
            self.pos += 1
        o = self.seen[key]
        self.input_tokens += o.prompt_tokens
        self.output_tokens += o.completion_tokens
        return ModelCall(
            text=o.text,
            usage=Usage(input_tokens=o.prompt_tokens, output_tokens=o.completion_tokens),
            latency_s=0.0,
            finish_reason=o.finish,
        )

    def chat(self, *args: Any, **kwargs: Any) -> ModelCall:
        raise UnsupportedPolicy("the policy makes chat requests: its truth by enumeration covers completion policies")

    def with_seed(self, seed: int | None) -> EnumeratingClient:
        return self

    def with_sampling(self, **kwargs: Any) -> EnumeratingClient:
        return self


@dataclass
class Deps:
    """What a value computed under some `seen` replies depends on: the seen replies it used
    (`hits`) and the requests it found unseen (`misses`). It holds under any other `seen` that
    agrees on the hits and lacks the misses (requests it never made cannot matter)."""

    hits: dict[RequestKey, Out]
    misses: set[RequestKey]

    def holds(self, seen: Mapping[RequestKey, Out]) -> bool:
        return all(seen.get(k) == o for k, o in self.hits.items()) and not any(k in seen for k in self.misses)

    def absorb(self, child: Deps, seen: Mapping[RequestKey, Out]) -> None:
        """Add a child's dependencies, seen from this node's `seen` (the child's seen holds it
        plus replies drawn in between, which are internal to this node)."""
        self.hits.update({k: o for k, o in child.hits.items() if k in seen})
        self.misses |= child.misses


@dataclass(frozen=True)
class Leaf:
    """One way a policy call can go: its probability, result, tokens, and the replies seen."""

    p: float
    result: Any
    input_tokens: int
    output_tokens: int
    seen: dict[RequestKey, Out]


class _SearchPlaceholder:
    """Stands for the search tool in the policy's context (the graph runs searches, not policies)."""

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedPolicy("the policy runs searches itself; the truth runs them in the graph's search node")


@dataclass
class _Runtime:
    context: AgentContext


@dataclass
class PolicyTruth:
    """Exact values of continuations for a completion-protocol policy, by enumeration."""

    profile: Profile
    bank: QuestionBank
    policy: Policy
    agent: AgentModel
    search: SearchFn
    _memo: dict[Any, list[tuple[Deps, Value]]] = field(default_factory=dict, repr=False)
    _replies: dict[RequestKey, list[tuple[float, Out]]] = field(default_factory=dict, repr=False)
    _docs: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    def enumerate(
        self, call: Callable[[EnumeratingClient], Any], seen: Mapping[RequestKey, Out], deps: Deps
    ) -> list[Leaf]:
        """Every outcome of one policy call (depth-first over the replies to its new requests)."""
        leaves: list[Leaf] = []
        stack: list[tuple[list[Out], float]] = [([], 1.0)]
        while stack:
            script, p = stack.pop()
            client = EnumeratingClient(list(script), seen)
            try:
                result = call(client)
            except _Branch as branch:
                deps.absorb(client.deps, seen)
                if branch.key not in self._replies:
                    self._replies[branch.key] = completion_replies(self.profile, self.bank, self.agent, branch.key)
                stack += [([*script, o], p * q) for q, o in self._replies[branch.key]]
                continue
            deps.absorb(client.deps, seen)
            leaves.append(Leaf(p, result, client.input_tokens, client.output_tokens, client.seen))
        return leaves

    def _recall(self, key: Any, seen: Mapping[RequestKey, Out]) -> tuple[Value, Deps] | None:
        for deps, value in self._memo.get(key, []):
            if deps.holds(seen):
                return value, deps
        return None

    def _store(self, key: Any, deps: Deps, value: Value) -> tuple[Value, Deps]:
        self._memo.setdefault(key, []).append((deps, value))
        return value, deps

    def _context(self, client: EnumeratingClient, cap: int) -> AgentContext:
        a = self.agent
        return AgentContext(
            model=client,
            search=_SearchPlaceholder() if a.offers_search else None,  # type: ignore[arg-type]
            search_cap=cap,
            max_tokens=a.max_tokens,
            answer_max_tokens=a.answer_max_tokens,
            evidence_words=a.evidence_words,
            malformed_retries=a.malformed_retries,
        )

    @staticmethod
    def _state(question: Question, docs: Sequence[Mapping[str, Any]], k: int, source: str) -> dict[str, Any]:
        return {
            "question": question.question,
            "evidence": [dict(d) for d in docs],
            "searches": k,
            "source": source,
            "steps": [],
            "transcript": [],
            "status": "ok",
            "history": [],
        }

    def retrieved(self, query: str, source: str) -> list[dict[str, Any]]:
        if (query, source) not in self._docs:
            self._docs[(query, source)] = [dict(d) for d in self.search(query, source)]
        return self._docs[(query, source)]

    @staticmethod
    def _key(docs: Sequence[Mapping[str, Any]]) -> Any:
        return tuple(d.get("doc_id") for d in docs)

    def forced(
        self,
        question: Question,
        docs: Sequence[Mapping[str, Any]],
        k: int,
        cap: int,
        source: str,
        seen: Mapping[RequestKey, Out],
    ) -> tuple[Value, Deps]:
        """The answer node: the policy's forced final answer from this state."""
        key = ("forced", question.id, k, cap, source, self._key(docs))
        if (hit := self._recall(key, seen)) is not None:
            return hit
        state = self._state(question, docs, k, source)
        deps = Deps({}, set())
        leaves = self.enumerate(lambda c: self.policy.force_answer(state, self._context(c, cap)), seen, deps)  # type: ignore[arg-type]
        p = sum(leaf.p for leaf in leaves if leaf.result.status == "ok" and is_success(question, leaf.result.text))
        value = Value(
            p,
            0.0,
            sum(leaf.p * leaf.input_tokens for leaf in leaves),
            sum(leaf.p * leaf.output_tokens for leaf in leaves),
        )
        return self._store(key, deps, value)

    def decide(
        self,
        question: Question,
        docs: Sequence[Mapping[str, Any]],
        k: int,
        cap: int,
        source: str,
        seen: Mapping[RequestKey, Out],
    ) -> tuple[Value, Deps]:
        """The decide node with k searches done under cap `cap`, then wherever the graph goes."""
        key = ("decide", question.id, k, cap, source, self._key(docs))
        if (hit := self._recall(key, seen)) is not None:
            return hit
        state = self._state(question, docs, k, source)
        deps = Deps({}, set())
        leaves = self.enumerate(lambda c: self.policy.decide(state, _Runtime(self._context(c, cap))), seen, deps)  # type: ignore[arg-type]
        p = searches = t_in = t_out = 0.0
        for leaf in leaves:
            update = leaf.result
            t_in += leaf.p * leaf.input_tokens
            t_out += leaf.p * leaf.output_tokens
            if update.get("status", "ok") != "ok":
                continue
            pending = update.get("pending") or {}
            if update.get("boundary") == BOUNDARY_PENDING:
                after, child = self.after_search(question, docs, pending.get("text") or "", k, cap, source, leaf.seen)
                p, searches = p + leaf.p * after.p, searches + leaf.p * (1.0 + after.searches)
            elif (answer := decided_answer(update)) is not None:
                p += leaf.p * is_success(question, answer)
                continue
            else:  # a search it may not run: the answer node forces an answer
                after, child = self.forced(question, docs, k, cap, source, leaf.seen)
                p, searches = p + leaf.p * after.p, searches + leaf.p * after.searches
            deps.absorb(child, seen)
            t_in += leaf.p * after.input_tokens
            t_out += leaf.p * after.output_tokens
        return self._store(key, deps, Value(p, searches, t_in, t_out))

    def after_search(
        self,
        question: Question,
        docs: Sequence[Mapping[str, Any]],
        query: str,
        k: int,
        cap: int,
        source: str,
        seen: Mapping[RequestKey, Out],
    ) -> tuple[Value, Deps]:
        """The search node ran `query`: evidence appended, one more search; decide or answer."""
        new = [*docs, *self.retrieved(query, source)]
        if k + 1 < cap:
            return self.decide(question, new, k + 1, cap, source, seen)
        return self.forced(question, new, k + 1, cap, source, seen)

    # --- continuations of a saved state (as `TruthModel`) ---------------------------------------

    def question_of(self, state: Mapping[str, Any]) -> Question:
        q = self.bank.lookup(state.get("question") or "")
        if q is None:
            raise KeyError(f"question not in the simulator's question set: {state.get('question')!r}")
        return q

    def continuation(
        self, state: Mapping[str, Any], action: str, *, search_budget: int = 3, switch_source: str | None = None
    ) -> Value:
        question = self.question_of(state)
        docs = list(state.get("evidence") or [])
        k = int(state.get("searches") or 0)
        source = state.get("source") or ""
        pending = state.get("pending") or {}
        at_pending = state.get("boundary") == BOUNDARY_PENDING and pending.get("action") == "search"
        cap = k + search_budget
        if action in ("THINK", "STOP"):
            return self.forced(question, docs, k, k, source, {})[0]
        if action not in ("SEARCH", "SWITCH"):
            raise ValueError(f"unknown action {action!r}")
        if at_pending:
            if action == "SWITCH" and not switch_source:
                raise ValueError("SWITCH needs switch_source")
            run_on = switch_source if action == "SWITCH" else source
            after = self.after_search(question, docs, pending.get("text") or "", k, cap, run_on or "", {})[0]
            return Value(after.p, 1.0 + after.searches, after.input_tokens, after.output_tokens)
        if action == "SWITCH":
            raise ValueError("SWITCH is legal only at a pending query")
        return self.decide(question, docs, k, cap, source, {})[0]

    def natural(self, question: Question, search_cap: int, source: str) -> Value:
        return self.decide(question, [], 0, search_cap, source, {})[0]

    def passages_of(self, state: Mapping[str, Any]) -> tuple[Passage, ...]:
        return tuple(distinct(shown_passage(d, self.agent.evidence_words) for d in state.get("evidence") or []))

    def think_answers(self, state: Mapping[str, Any]) -> dict[str | None, float]:
        """The THINK continuation's final answers and their probabilities (None: failed)."""
        question, docs = self.question_of(state), list(state.get("evidence") or [])
        k = int(state.get("searches") or 0)
        st = self._state(question, docs, k, state.get("source") or "")
        out: dict[str | None, float] = {}
        for leaf in self.enumerate(lambda c: self.policy.force_answer(st, self._context(c, k)), {}, Deps({}, set())):  # type: ignore[arg-type]
            ans = leaf.result.text if leaf.result.status == "ok" else None
            out[ans] = out.get(ans, 0.0) + leaf.p
        return out
