"""The tagged policy at Search-R1's format: its stop strings, and `protocol: searchr1`, whose
transcript is Search-R1's rollout.

The reference is Search-R1's own agent logic (PeterGriffinJin/Search-R1 a14dc3a), restated here
because its files import torch / transformers / verl:
- `infer.py` 20-24: the prompt (the same text as `scripts/data_process/nq_search.py` 32-36), with
  the question stripped and given a `?` (13-15);
- `infer.py` 83-84 and 31-50: generation stops once the sequence ends with `</search>`
  (`StopOnSequence` over `target_sequences`), and 109-113: a turn ending in EOS (after
  `</answer>`) ends the loop;
- `infer.py` 52-59 and 118: the query is the last `<search>(.*?)</search>` of the sequence;
  61-79: results are rendered by `_passages2string` from each document's `contents`, first line
  the title (`search_r1/llm_agent/generation.py` 460-469 renders them the same way);
- `generation.py` 61-66: a response is cut after its first `</search>` (else its first
  `</answer>`), and 391: the observation appended to the sequence is
  `\\n\\n<information>{results.strip()}</information>\\n\\n`. (`infer.py` 17 and 125 append
  `\\n\\n{output}<information>{results}</information>\\n\\n` instead: its blank lines sit before the
  turn, not between the turn and its results, and it does not strip. The trained models saw
  generation.py's sequence, so that is the one the protocol reproduces.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from branchpoint.agents import AgentContext, build_graph, initial_state, recursion_limit, resolve_policy
from branchpoint.agents.prompts import SEARCHR1_PROMPT, searchr1_messages
from branchpoint.agents.protocols import close_tagged_reply
from branchpoint.models.call import ModelCall
from branchpoint.tools import SearchTool
from branchpoint.traces import Usage
from tests.graphs import invoke

Q = "What is the capital of Australia"  # no `?`: Search-R1 adds one

#: `infer.py` 20-24, verbatim (a literal here, so an edit of the shipped prompt fails the test).
INFER_PROMPT = (
    "Answer the given question. "
    "You must conduct reasoning inside <think> and </think> first every time you get new information. "
    "After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query "
    "</search> and it will return the top searched results between <information> and </information>. "
    "You can search as many times as your want. "
    "If you find no further external knowledge needed, you can directly provide the answer inside <answer> "
    "and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. "
    "Question: {question}\n"
)


def model_continuation(sequence: str) -> str:
    """What the test's model writes after a sequence: it keeps writing past `</search>` (an
    invented result and an answer, as models trained on Search-R1 transcripts do), searches twice,
    then answers."""
    turn = sequence.count("</information>\n\n")  # the results blocks (the prompt names the tag too)
    if turn < 2:
        query = ["capital of Australia", "Canberra parliament"][turn]
        return (
            f"<think>I need facts {turn}.</think>\n<search> {query} </search>\n\n"
            "<information>Doc 1(Title: made up) nothing</information>\n\n<answer> Sydney </answer>"
        )
    return "<think>The passages say Canberra.</think>\n<answer> Canberra </answer>"


def search_r1_rollout(search) -> tuple[str, list[str]]:
    """Search-R1's loop over `model_continuation` (the module docstring's lines): the final
    sequence (prompt and every turn) and the queries it searched."""
    sequence = INFER_PROMPT.format(question=Q.strip() + ("" if Q.strip().endswith("?") else "?"))
    queries = []
    while True:
        out = model_continuation(sequence)
        if "</search>" not in out:  # ends in EOS after </answer>
            return sequence + out, queries
        out = out.split("</search>")[0] + "</search>"  # StopOnSequence / _postprocess_responses
        query = re.findall(r"<search>(.*?)</search>", sequence + out, re.DOTALL)[-1]
        queries.append(query)
        results = ""
        for idx, doc in enumerate(search(query)):  # _passages2string over {"document": {"contents"}}
            content = f'"{doc.title}"\n{doc.text}'  # the contents a Search-R1 server serves for the row
            title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
            results += f"Doc {idx + 1}(Title: {title}) {text}\n"
        sequence += out + f"\n\n<information>{results.strip()}</information>\n\n"


@dataclass
class SequenceModel:
    """A chat server for the test: it renders the request as the model sees it (the user prompt,
    then the assistant sequence it is asked to continue) and answers `model_continuation`, cut at
    the request's stop strings with the stop string left out (as OpenAI and llama.cpp do)."""

    name: str = "sequence-model"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def chat(self, messages, *, tools=None, max_tokens=None, stop=None) -> ModelCall:
        self.requests.append({"messages": messages, "stop": stop})
        assert messages[0]["role"] == "user" and len(messages) <= 2
        sequence = messages[0]["content"] + (messages[1]["content"] if len(messages) == 2 else "")
        text, finish = model_continuation(sequence), "stop"
        cuts = [i for i in (text.find(s) for s in stop or []) if i >= 0]
        if cuts:
            text = text[: min(cuts)]
        return ModelCall(text=text, usage=Usage(input_tokens=1, output_tokens=1), latency_s=0.0, finish_reason=finish)


def run_searchr1(source, model, cap: int = 3):
    ctx = AgentContext(model=model, search=SearchTool({"mem": source}, "mem", top_k=2), search_cap=cap)
    ctx.protocol = "searchr1"
    graph = build_graph(resolve_policy("tagged"))
    return invoke(graph, initial_state("q1", Q, "mem"), {"recursion_limit": recursion_limit(cap)}, context=ctx)


def test_the_prompt_is_search_r1s():
    assert SEARCHR1_PROMPT.format(question="Who?") == INFER_PROMPT.format(question="Who?")
    [user] = searchr1_messages({"question": "  who wrote Don Quixote "})
    assert user == {"role": "user", "content": INFER_PROMPT.format(question="who wrote Don Quixote?")}


def test_the_searchr1_transcript_is_search_r1s_rollout(keyword_source):
    """Every request the policy sends shows the model Search-R1's sequence at that turn, the
    searches are Search-R1's queries, and the answer is the one its loop ends with."""
    from tests.conftest import KeywordSource

    reference, queries = search_r1_rollout(lambda q: KeywordSource().search(q, 2))
    model = SequenceModel()
    out = run_searchr1(keyword_source, model)
    assert out["final_answer"] == "Canberra" and out["searches"] == 2
    assert keyword_source.queries == [q.strip() for q in queries]  # parse_tagged strips, as generation.py does
    assert all(r["stop"] == ["</search>", "</answer>"] for r in model.requests)
    shown = [
        r["messages"][0]["content"] + (r["messages"][1]["content"] if len(r["messages"]) == 2 else "")
        for r in model.requests
    ]
    assert shown[-1] + model_continuation(shown[-1]) == reference
    assert all(reference.startswith(s) for s in shown)
    # each search turn kept as the model wrote it up to </search> (the stop string put back)
    turns = [s["raw"] for s in out["steps"] if s.get("action") == "search"]
    assert turns == [model_continuation(s).split("</search>")[0] + "</search>" for s in shown[:2]]


def test_the_forced_answer_continues_the_sequence_from_an_opened_answer(keyword_source):
    """At the search cap the sequence is sent once more with `<answer>` opened at its end."""
    model = SequenceModel()
    out = run_searchr1(keyword_source, model, cap=1)
    last = model.requests[-1]["messages"]
    assert last[-1]["role"] == "assistant" and last[-1]["content"].endswith("</information>\n\n<answer>")
    assert model.requests[-1]["stop"] == ["</answer>"]
    assert out["searches"] == 1 and out["status"] == "ok" and out["final_answer"]


@pytest.mark.parametrize(
    ("text", "finish", "kept"),
    [
        # vLLM with include_stop_str_in_output: the turn as it came
        ("<think>a</think><search>q</search>", "stop", "<think>a</think><search>q</search>"),
        # OpenAI / llama.cpp leave the stop string out: put back
        ("<think>a</think><search>q", "stop", "<think>a</think><search>q</search>"),
        ("<answer> Paris", "stop", "<answer> Paris</answer>"),
        # a server that ignored stop: cut after the first closing tag (generation.py 61-66)
        ("<search>q</search>\n\n<information>x</information><answer>y</answer>", "length", "<search>q</search>"),
        ("<answer>y</answer> and then <search>z</search>", "stop", "<answer>y</answer>"),
        # cut off before any closing tag: left as it is (no decision)
        ("<think>still thinking <search>q", "length", "<think>still thinking <search>q"),
        ("no tags at all", "stop", "no tags at all"),
    ],
)
def test_a_tagged_reply_is_closed_as_the_sequence_keeps_it(text, finish, kept):
    assert close_tagged_reply(text, finish) == kept


def test_a_search_that_ran_on_to_max_tokens_still_counts(keyword_source):
    """A reply that closed its `</search>` and then hit max_tokens (a server without stop
    strings) is a whole decision: Search-R1 keeps it (generation.py 61-66); it used to be dropped
    as `length`, so such a model ended every execution `length` with no search."""
    replies = [
        ("<search>capital of Australia</search> <information>made up", "length"),
        ("<answer>Canberra</answer>", "stop"),
    ]

    class IgnoresStop:  # a server that reads no `stop` field
        name = "ignores-stop"

        def chat(self, messages, **kwargs) -> ModelCall:
            text, finish = replies.pop(0)
            return ModelCall(text=text, usage=Usage(), latency_s=0.0, finish_reason=finish)

    model = IgnoresStop()
    ctx = AgentContext(model=model, search=SearchTool({"mem": keyword_source}, "mem", top_k=2), search_cap=2)
    out = invoke(
        build_graph(resolve_policy("tagged")),
        initial_state("q1", Q, "mem"),
        {"recursion_limit": recursion_limit(2)},
        context=ctx,
    )
    assert out["status"] == "ok" and out["searches"] == 1 and out["final_answer"] == "Canberra"


def test_searchr1_without_search_is_refused_with_the_reason():
    # Search-R1's prompt offers search word for word: a no-search condition under it would still
    # tell the model it may search, so the spec names the no-search policy instead
    from pydantic import ValidationError

    from branchpoint.experiments.spec.sections import AgentSpec

    with pytest.raises(ValidationError, match="agent.policy: no_search"):
        AgentSpec(policy="tagged", protocol="searchr1", search=False)
    assert AgentSpec(policy="tagged", protocol="searchr1").search
