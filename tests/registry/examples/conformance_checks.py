"""Check your components with the conformance kit: one test, the same checks branchpoint's
own components pass (here on the example components above; in your package, import yours)."""

from branchpoint.api import check_forecaster, check_judge, check_policy, check_source
from tests.registry.examples.evidence_count_forecaster import early_search_gain
from tests.registry.examples.keyword_source import KeywordSourceSpec
from tests.registry.examples.search_first_policy import search_first


def test_my_components_conform() -> None:
    check_policy(search_first)  # the agent graph, on a scripted model and the demo corpus
    check_judge("token-f1", {"threshold": 0.8})  # by name, with its settings
    check_source(KeywordSourceSpec(passages={"d1": "Canberra is the capital of Australia."}))
    check_forecaster(early_search_gain)  # on the kit's fork-study states
