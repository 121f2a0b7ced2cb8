"""The budget checks: may this state search, is its token budget spent, why was an answer forced.
Defined once, for the policies and the graph's routing.

Two budgets bound an execution:

- the *search cap* (`ctx.search_cap`): at most that many searches; then the answer is forced;
- the *token budget* (`ctx.token_budget`, `agent.token_budget`): at most that many *generated*
  tokens, i.e. the completion tokens of every model call of the execution's path (decisions,
  their malformed retries, the `self_eval` call, the forced answer), reasoning tokens included
  as OpenAI-compatible servers count them (`usage.completion_tokens`; the trace's
  `output_tokens`). Input tokens are not counted: a transcript is resent on every call, so an
  input budget would mostly count the same prompt again. The count lives in the state's
  `generated_tokens` channel, so a fork branch continues its parent's count. The budget is
  checked before each decision, where the search cap is: once the count reaches it, the next
  node is the forced answer (a search that the spending call decided still runs). So an
  execution may overrun the budget by the last decision's and the forced answer's tokens, as it
  overruns the search cap by nothing but makes one forced call after it.

Every forced answer records why it was forced (`forced_by` on its steps, `FORCED_BY`), and every
record a `budget` block (`budget_block`): the limits, what was used, and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from branchpoint.agents.state import AgentContext

#: Why a final answer was forced: a fork directive (THINK / STOP), the token budget, the search
#: cap, or a search the policy asked for where none is offered (`no_search`).
FORCED_BY: tuple[str, ...] = ("directive", "token_budget", "search_cap", "no_search")


def tokens_spent(state: Mapping[str, Any], ctx: AgentContext) -> bool:
    """True when a token budget is set and the state's generated tokens have reached it."""
    return ctx.token_budget is not None and int(state.get("generated_tokens") or 0) >= ctx.token_budget


def may_search(state: Mapping[str, Any], ctx: AgentContext) -> bool:
    """True when the search tool is offered (and the cap allows any search), the execution has
    made fewer searches than its cap (`ctx.search_cap`: the spec's cap, or a fork branch's
    searches so far plus its budget) and its token budget, if any, is not spent."""
    return ctx.offers_search and int(state.get("searches", 0)) < ctx.search_cap and not tokens_spent(state, ctx)


def must_answer(state: Mapping[str, Any], ctx: AgentContext) -> bool:
    """True when no further decision may be made: the token budget is spent."""
    return tokens_spent(state, ctx)


def generated_tokens(steps: Sequence[Mapping[str, Any]]) -> int:
    """The generated tokens of steps (state form): Σ usage.output_tokens (reasoning included)."""
    return sum(int((s.get("usage") or {}).get("output_tokens") or 0) for s in steps)


def counted(state: Mapping[str, Any], update: Any, ctx: AgentContext) -> Any:
    """A node's update with `generated_tokens` advanced by its steps' generated tokens, under a
    token budget (without one the channel is not written, so checkpoints stay as they were)."""
    if ctx.token_budget is None or not isinstance(update, dict) or "generated_tokens" in update:
        return update
    spent = int(state.get("generated_tokens") or 0) + generated_tokens(update.get("steps") or [])
    return {**update, "generated_tokens": spent}


def forced_reason(state: Mapping[str, Any], ctx: AgentContext) -> str:
    """Why the `answer` node forces an answer on this state (one of `FORCED_BY`)."""
    directive: Mapping[str, Any] = state.get("directive") or {}
    if directive.get("action") in ("THINK", "STOP"):
        return "directive"
    if tokens_spent(state, ctx):
        return "token_budget"
    if ctx.offers_search and int(state.get("searches", 0)) >= ctx.search_cap:
        return "search_cap"
    return "no_search"


def budget_block(values: Mapping[str, Any], ctx: AgentContext) -> dict[str, Any]:
    """The record's `budget` block: the search cap (None where no search is offered), the
    searches made on the path, the token budget and the generated tokens counted against it
    (None without one), and why the answer was forced (None: the model answered by itself)."""
    forced = [s.get("forced_by") for s in values.get("steps") or [] if s.get("kind") == "forced_answer"]
    return {
        "search_cap": ctx.search_cap if ctx.offers_search else None,
        "searches": int(values.get("searches", 0)),
        "token_budget": ctx.token_budget,
        "tokens": int(values.get("generated_tokens") or 0) if ctx.token_budget is not None else None,
        "forced_by": next((f for f in reversed(forced) if f), None),
    }
