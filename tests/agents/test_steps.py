"""Typed steps: what the nodes write into the state validates back into the same trace step."""

from __future__ import annotations

from branchpoint.agents.steps import as_state, model_step, relabeled, search_step
from branchpoint.models.call import ModelCall
from branchpoint.tools.search import SearchResult
from branchpoint.traces import RetrievedDoc, Step, Usage


def test_model_step_state_form_is_plain_data_and_validates_back():
    call = ModelCall(
        text="<answer>Canberra</answer>",
        usage=Usage(input_tokens=12, output_tokens=3),
        latency_s=0.25,
        finish_reason="stop",
        reasoning="thinking",
    )
    state = as_state(model_step("decide", call, "answer", "Canberra"))
    assert state == {
        "kind": "decide",
        "usage": {"input_tokens": 12, "output_tokens": 3, "reasoning_tokens": None},
        "latency_s": 0.25,
        "action": "answer",
        "text": "Canberra",
        "finish_reason": "stop",
        "raw": "<answer>Canberra</answer>",
        "reasoning": "thinking",
    }
    assert Step.model_validate(state).model_extra == {"reasoning": "thinking"}
    assert relabeled(state, "forced_answer")["kind"] == "forced_answer" and state["kind"] == "decide"


def test_search_step_keeps_every_retrieved_field():
    doc = RetrievedDoc(doc_id="d1", score=1.5, text="Canberra is the capital.", title="Canberra")
    result = SearchResult(query="capital of Australia", source="mem", docs=[doc], latency_s=0.01, cache_hit=False)
    state = as_state(search_step(result))
    assert set(state) == {"kind", "query", "source", "retrieved", "latency_s", "cache_hit"}
    assert state["retrieved"] == [doc.model_dump()]
    assert Step.model_validate(state).retrieved[0] == doc
