"""The conformance kit: checks a plug-in author runs on their component, as branchpoint runs it.

Each check exercises a component through the interfaces branchpoint itself calls, on the
scripted model and the embedded demo data (no network), and raises AssertionError with a
message naming the component and the rule it broke:

- `check_policy(policy)`: the agent graph to its end, the decide node's update, same state →
  same requests, the forced answer;
- `check_judge(judge, settings)`: judgments of the kit's records, valid labels, repeatable,
  replacing its own on re-judging;
- `check_source(spec_or_source)`: settings that round-trip through a spec and open a source whose
  searches are RetrievedDocs, at most k, best first, repeatable;
- `check_forecaster(forecaster)` and `check_router(router)`: one valid value per state, no test
  outcome read, repeatable.

For pytest, `conforms(kind, component, **options)` runs the kind's check with the kit's frames
left out of the failure, and `registered(kind)` lists the names to parametrise over:

    @pytest.mark.parametrize("name", registered("policy"))
    def test_policy_conforms(name):
        conforms("policy", name)

The built-in components pass the kit (tests/testing/test_conformance.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from branchpoint.registry import REGISTRY
from branchpoint.testing.judge_kit import check_judge, check_judgments
from branchpoint.testing.policy_kit import KeywordSource, check_policy, kit_model, protocol_reply
from branchpoint.testing.source_kit import check_search, check_source, check_source_spec
from branchpoint.testing.value_kit import check_forecaster, check_router

__all__ = [
    "CHECKS",
    "KeywordSource",
    "check_forecaster",
    "check_judge",
    "check_judgments",
    "check_policy",
    "check_router",
    "check_search",
    "check_source",
    "check_source_spec",
    "conforms",
    "kit_model",
    "protocol_reply",
    "registered",
]

#: The kit's check of each kind it covers.
CHECKS: dict[str, Callable[..., Any]] = {
    "policy": check_policy,
    "judge": check_judge,
    "source": check_source,
    "forecaster": check_forecaster,
    "router": check_router,
}


def conforms(kind: str, component: Any, **options: Any) -> Any:
    """The kind's check (`CHECKS`) of `component`; pytest shows a failure at the caller."""
    __tracebackhide__ = True
    if kind not in CHECKS:
        raise ValueError(f"the kit checks {', '.join(CHECKS)}; not {kind!r}")
    return CHECKS[kind](component, **options)


def registered(kind: str) -> list[str]:
    """The registered names of a kind (built-ins and plug-ins), to parametrise a test over."""
    return REGISTRY.names(kind)
