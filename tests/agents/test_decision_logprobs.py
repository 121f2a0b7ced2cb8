"""The decision token of a reply, found per protocol, and what its alternatives sum to (hand-built)."""

from __future__ import annotations

import math

import pytest

from branchpoint.agents.decision_logprobs import decision_record
from branchpoint.models.logprobs import TokenLogprob

L = math.log


def tok(token: str, p: float = 1.0, *alts: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(token, L(p), tuple((t, L(q)) for t, q in alts))


def test_constrained_decides_where_the_word_parts() -> None:
    tokens = [tok("se", 0.5, ("se", 0.5), ("ans", 0.3), ("s", 0.1)), tok("arch"), tok('"')]
    record = decision_record(tokens, "constrained")
    assert record is not None and (record["position"], record["token"]) == (0, "se")
    # "s" is a prefix of "search" only: it counts as search
    assert record["p_search"] == pytest.approx(0.6) and record["p_answer"] == pytest.approx(0.3)
    assert record["top_mass"] == pytest.approx(0.9)
    probs = [0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9]
    assert record["entropy"] == pytest.approx(-sum(p * math.log2(p) for p in probs))


def test_tagged_skips_the_think_block_and_the_shared_bracket() -> None:
    tokens = [
        tok("<think>"),
        tok(" need to <search>"),  # a tag inside the thinking is not the decision
        tok("</think>"),
        tok("\n\n"),
        tok("<", 1.0, ("<", 0.9), ("I", 0.1)),
        tok("answer", 0.25, ("search", 0.75), ("answer", 0.25)),
        tok(">"),
    ]
    record = decision_record(tokens, "tagged")
    assert record is not None and record["position"] == 5 and record["token"] == "answer"
    assert record["p_search"] == pytest.approx(0.75) and record["p_answer"] == pytest.approx(0.25)


def test_native_reads_the_first_token_after_thinking() -> None:
    tokens = [
        tok("<think>"),
        tok("hm"),
        tok("</think>"),
        tok("\n"),
        tok("Leonardo", 0.3, ("<tool_call>", 0.6), ("Leonardo", 0.3), ("\n", 0.05)),
    ]
    record = decision_record(tokens, "native")
    assert record is not None and record["position"] == 4
    assert record["p_search"] == pytest.approx(0.6)
    assert record["p_answer"] == pytest.approx(0.3)  # the blank alternative counts for neither


def test_the_generated_token_is_added_when_the_server_left_it_out() -> None:
    record = decision_record([tok("answer", 0.2, ("search", 0.7))], "constrained")
    assert record is not None and record["p_answer"] == pytest.approx(0.2)
    assert [t["token"] for t in record["top"]] == ["search", "answer"]


@pytest.mark.parametrize(
    ("tokens", "protocol"),
    [
        ([], "constrained"),
        (None, "native"),
        ([tok("Let"), tok(" me")], "constrained"),  # a malformed reply opens no action
        ([tok("<"), tok("information")], "tagged"),
        ([tok("\n"), tok(" ")], "native"),
    ],
)
def test_no_record_where_no_action_is_opened(tokens: list[TokenLogprob] | None, protocol: str) -> None:
    assert decision_record(tokens, protocol) is None
