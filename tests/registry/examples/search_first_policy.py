"""Add a new policy: one decorated decide node (then `agent: {policy: search-first}` in a spec,
after importing this module, e.g. through a plug-in, or `policy: my_module:search_first`)."""

from branchpoint.api import Decision, apply_decision, fewshot_decision, policy


@policy("search-first")
async def search_first(state, runtime):
    """Search the question verbatim once, then let the few-shot model decide."""
    ctx = runtime.context
    if state["searches"] == 0 and ctx.offers_search:
        return apply_decision(state, Decision("search", state["question"]), ctx)
    return apply_decision(state, await fewshot_decision(state, ctx, allow_search=ctx.offers_search), ctx)
