"""The cap check: may this state search? Defined once, for the policies and the graph's routing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from branchpoint.agents.state import AgentContext


def may_search(state: Mapping[str, Any], ctx: AgentContext) -> bool:
    """True when the search tool is offered (and the cap allows any search) and the execution has
    made fewer searches than its cap (`ctx.search_cap`: the spec's cap, or a fork branch's
    searches so far plus its budget)."""
    return ctx.offers_search and int(state.get("searches", 0)) < ctx.search_cap
