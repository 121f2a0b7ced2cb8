"""Token log probabilities of the simulated model's replies, in vLLM's wire format.

Asked for as vLLM reads it (chat: `logprobs: true` with `top_logprobs: N`, default 0;
completions: `logprobs: N`), a reply carries `choices[0].logprobs`: chat's `{"content": [{token,
logprob, bytes, top_logprobs}]}` over every generated token (the reasoning block included, as
vLLM lists it), completions' parallel `tokens`, `token_logprobs`, `top_logprobs` (each a
`{token: logprob}` object holding the sampled token too) and `text_offset`. Nothing else in the
reply changes, and the draws do not either: `behaviour.request_rng` leaves these fields out of
its seed.

The probabilities are the simulator's own, at temperature 1 (as vLLM's default
`--logprobs-mode raw_logprobs` reports the model's distribution before temperature and top-p):
the reply's possible contents (`candidates`: each search query with P(SEARCH)·P(query), each
answer with P(ANSWER)·P(answer), in the protocol's text) are cut into the simulator's tokens
(`sim_tokens`), and the log probability of a token is that of the next token among the contents
that share the tokens before it. So at the decision token (the first where SEARCH and ANSWER
contents part) the alternatives sum to P(SEARCH) and P(ANSWER) exactly: a logprob forecaster on
the simulator reads the true decision probability. A token no candidate explains (reasoning
text, a malformed or cut-off reply, text after a stop or a run-on) has log probability 0 and no
other alternative: the simulator lists only tokens it could have drawn.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from branchpoint.sim.behaviour import Reply, answer_probs, completion_text, query_probs, reshape, search_prob
from branchpoint.sim.passages import features
from branchpoint.sim.profile import Profile

if TYPE_CHECKING:
    from branchpoint.sim.observe import Observation

#: Special tokens the simulator's vocabulary has as single tokens (as Qwen's does).
SPECIAL_TOKENS: tuple[str, ...] = ("<tool_call>", "</tool_call>", "<think>", "</think>")
#: Most log probabilities per position vLLM returns by default (`--max-logprobs 20`).
MAX_LOGPROBS = 20
_SPECIAL = "|".join(re.escape(t) for t in SPECIAL_TOKENS)
_TOKEN = re.compile(rf"{_SPECIAL}|\s+(?={_SPECIAL})|\s*(?:[^\W\d_]{{1,7}}|\d|[^\w\s]|_)|\s+")


def sim_tokens(text: str) -> list[str]:
    """The simulator's tokens of `text`, which join back into it: special tokens whole (white
    space before one is a token of its own), runs of up to 7 letters, digits and punctuation one
    each, each with the white space before it."""
    return _TOKEN.findall(text)


def hermes_tool_call(query: str) -> str:
    """The text a Hermes-format model generates for a search tool call (what vLLM's hermes
    parser turns into `tool_calls`)."""
    call = {"name": "search", "arguments": {"query": query}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def requested(body: Mapping[str, Any], *, chat: bool) -> int | None:
    """How many top log probabilities per token a request asks for (None: none)."""
    if chat:
        if body.get("logprobs") is not True:
            return None
        n = body.get("top_logprobs")
        return 0 if n is None else int(n)
    n = body.get("logprobs")
    return None if n is None or isinstance(n, bool) else int(n)


def refusal_message(body: Mapping[str, Any], *, chat: bool) -> tuple[str, str] | None:
    """(message, parameter) of vLLM's 400 for log probabilities asked for wrongly (None: fine):
    chat `top_logprobs` without `logprobs: true`, a negative count, or more than the server's
    maximum (vLLM's `check_logprobs` validator and its engine's max-logprobs check)."""
    name = "top_logprobs" if chat else "logprobs"
    value = body.get(name)
    if chat and value is not None and body.get("logprobs") is not True:
        return "when using `top_logprobs`, `logprobs` must be set to true.", name
    if value is None or (chat and body.get("logprobs") is not True):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return f"`{name}` must be a non-negative integer.", name
    if value > MAX_LOGPROBS:
        return f"Requested sample logprobs of {value}, which is greater than max allowed: {MAX_LOGPROBS}", name
    return None


def candidates(profile: Profile, obs: Observation) -> dict[str, float]:
    """Every content the reply to `obs` could have, in the protocol's text, with its probability
    at temperature 1 (empty where the simulator has no distribution: self-evaluation, structured
    output)."""
    if obs.task != "decide" or obs.structured:
        return {}
    f = features(obs.question, obs.passages)
    answers = reshape(answer_probs(profile, obs.question, f), 1.0)
    p_search = 0.0
    if obs.can_search:
        p_search = 1.0 if obs.tool_required else search_prob(profile, obs.question, f, obs.effort)
    out: dict[str, float] = {}

    def add(kind: str, text: str, p: float) -> None:
        if p <= 0:
            return
        if obs.protocol == "completion":
            content = completion_text(Reply(kind, text))  # type: ignore[arg-type]
        elif obs.protocol == "native":
            content = hermes_tool_call(text) if kind == "search" else text
        elif obs.protocol == "tagged":
            if kind == "search":
                content = f"<search>{text}</search>"
            else:
                content = f"{text}</answer>" if obs.continues_answer else f"<answer>{text}</answer>"
        else:
            content = text
        out[content] = out.get(content, 0.0) + p

    if p_search > 0:
        for query, pq in reshape(query_probs(profile, obs.question_text, obs.passages), 1.0).items():
            add("search", query, p_search * pq)
    for answer, pa in answers.items():
        add("answer", answer, (1.0 - p_search) * pa)
    return out


def token_logprobs(
    body_text: str, options: Mapping[str, float], n: int, prefix: str = ""
) -> list[tuple[str, float, list[tuple[str, float]]]]:
    """(token, logprob, top n alternatives) for every token of `prefix` + `body_text`: the
    prefix's tokens (the reasoning block) with log probability 0, the body's from the tree of
    `options` (module doc)."""
    out: list[tuple[str, float, list[tuple[str, float]]]] = [(t, 0.0, [(t, 0.0)][:n]) for t in sim_tokens(prefix)]
    live = [(sim_tokens(text), p) for text, p in options.items() if p > 0]
    for i, token in enumerate(sim_tokens(body_text)):
        nxt: dict[str, float] = {}
        for toks, p in live:
            if len(toks) > i:
                nxt[toks[i]] = nxt.get(toks[i], 0.0) + p
        total = sum(nxt.values())
        if token not in nxt or total <= 0:
            live = []
            out.append((token, 0.0, [(token, 0.0)][:n]))
            continue
        ranked = sorted(nxt.items(), key=lambda kv: -kv[1])[:n]
        out.append((token, math.log(nxt[token] / total), [(t, math.log(p / total)) for t, p in ranked]))
        live = [(toks, p) for toks, p in live if len(toks) > i and toks[i] == token]
    return out


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def chat_logprobs(profile: Profile, obs: Observation, message: Mapping[str, Any], n: int) -> dict[str, Any]:
    """`choices[0].logprobs` of a chat reply: every generated token (reasoning block, content or
    tool call) with its top `n` alternatives."""
    content = message.get("content") or ""
    prefix = ""
    if message.get("reasoning"):
        prefix = f"<think>\n{message['reasoning']}\n</think>\n\n"
    elif content.startswith("<think>") and "</think>" in content:  # no reasoning parser: kept in content
        cut = content.index("</think>") + len("</think>")
        rest = content[cut:]
        stripped = rest.lstrip("\n")
        prefix, content = content[:cut] + rest[: len(rest) - len(stripped)], stripped
    calls = message.get("tool_calls") or []
    if calls:
        content = "".join(hermes_tool_call(json.loads(c["function"]["arguments"]).get("query", "")) for c in calls)
    rows = token_logprobs(content, candidates(profile, obs), n, prefix)
    return {"content": [{**_entry(t, lp), "top_logprobs": [_entry(a, alp) for a, alp in top]} for t, lp, top in rows]}


def completion_logprobs(profile: Profile, obs: Observation, text: str, n: int, offset: int) -> dict[str, Any]:
    """`choices[0].logprobs` of a completion: vLLM's parallel lists, each `top_logprobs` object
    holding the top `n` alternatives and the sampled token; offsets count from `offset` (the
    prompt's length, as vLLM counts them)."""
    rows = token_logprobs(text, candidates(profile, obs), n)
    offsets, at = [], offset
    for t, _, _ in rows:
        offsets.append(at)
        at += len(t)
    return {
        "text_offset": offsets,
        "token_logprobs": [lp for _, lp, _ in rows],
        "tokens": [t for t, _, _ in rows],
        "top_logprobs": [{**dict(top), t: lp} for t, lp, top in rows],
    }
