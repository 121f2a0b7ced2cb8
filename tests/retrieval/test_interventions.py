"""Retrieval interventions (`empty`, `random`, `noisy`, `shuffled`, `oracle`, `withheld`) over a real BM25
source on the demo corpus: each kind's effect on the result list, checked by hand; draws keyed
by (seed, question, query); the retrieval cache keyed on the intervention and the question."""

from __future__ import annotations

import pytest

from branchpoint.datasets import load_questions
from branchpoint.errors import InputError
from branchpoint.experiments.source_pool import SourcePool
from branchpoint.experiments.spec import BM25SourceSpec, ExperimentSpec, RetrievalSpec
from branchpoint.retrieval.interventions import OracleRefused, SearchContext, context_of, holds_answer
from branchpoint.retrieval.sources import (
    EmptySourceSpec,
    NoisySourceSpec,
    OracleSourceSpec,
    RandomSourceSpec,
    ShuffledSourceSpec,
    WithheldSourceSpec,
)

QUERY = "What is the capital of Australia?"


@pytest.fixture(scope="module")
def bm():
    return BM25SourceSpec().open("bm")


@pytest.fixture(scope="module")
def demo():
    return {q.id: q for q in load_questions("demo")}


def ctx(q=None, seed: int = 0) -> SearchContext:
    return context_of(q, seed)


def ids(docs) -> list[str]:
    return [d.doc_id for d in docs]


def test_empty_returns_nothing(bm):
    assert EmptySourceSpec().open_over("e", None).bind(ctx()).search(QUERY, 3) == []


def test_random_draws_k_distinct_corpus_passages_keyed_by_seed_question_and_query(bm, demo):
    src = RandomSourceSpec(base="bm").open_over("r", bm)
    corpus = {p.doc_id for p in bm.index.passages}
    q = demo["demo-a01"]
    first = src.bind(ctx(q)).search(QUERY, 3)
    assert len(set(ids(first))) == 3 and set(ids(first)) <= corpus
    assert all(d.source == "r" and d.score == 0.0 for d in first)
    assert ids(src.bind(ctx(q)).search(QUERY, 3)) == ids(first)  # same seed, question, query
    others = [
        ids(src.bind(ctx(q, seed=1)).search(QUERY, 3)),
        ids(src.bind(ctx(demo["demo-u01"])).search(QUERY, 3)),
        ids(src.bind(ctx(q)).search(QUERY + " ", 3)),
    ]
    assert all(o != ids(first) for o in others)  # 79 passages: a repeat of all 3 is ~1e-5


def test_noisy_replaces_round_p_times_k_positions_with_passages_not_in_the_list(bm, demo):
    base = bm.search(QUERY, 3)
    q = demo["demo-a01"]
    third = NoisySourceSpec(base="bm", p=1 / 3).open_over("n", bm).bind(ctx(q)).search(QUERY, 3)
    kept = [i for i in range(3) if third[i].doc_id == base[i].doc_id]
    assert len(kept) == 2  # round(3 · 1/3) = 1 replaced, the others in place
    (swapped,) = set(range(3)) - set(kept)
    assert third[swapped].doc_id not in ids(base) and third[swapped].score == 0.0
    assert ids(NoisySourceSpec(base="bm", p=0).open_over("n", bm).bind(ctx(q)).search(QUERY, 3)) == ids(base)
    every = NoisySourceSpec(base="bm", p=1).open_over("n", bm).bind(ctx(q)).search(QUERY, 3)
    assert len(set(ids(every))) == 3 and not set(ids(every)) & set(ids(base))
    half = NoisySourceSpec(base="bm", p=0.5).open_over("n", bm)
    assert [half.noisy_count(n) for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]  # halves up


def test_shuffled_permutes_ranks_and_keeps_each_passage_with_its_score(bm, demo):
    src = ShuffledSourceSpec(base="bm").open_over("s", bm)
    moved = 0
    for q in list(demo.values())[:20]:
        base = bm.search(q.question, 3)
        out = src.bind(ctx(q)).search(q.question, 3)
        assert sorted((d.doc_id, d.score) for d in out) == sorted((d.doc_id, d.score) for d in base)
        assert ids(src.bind(ctx(q)).search(q.question, 3)) == ids(out)
        moved += ids(out) != ids(base)
    assert moved >= 10  # 5 of 6 permutations of 3 move something


def test_oracle_puts_supporting_passages_first_then_the_base_list(bm, demo):
    src = OracleSourceSpec(base="bm").open_over("o", bm)
    q = demo["demo-a01"]  # support: demo-001 (Canberra)
    query = "Leonardo da Vinci painting"  # a query whose BM25 list lacks the gold passage
    base = bm.search(query, 3)
    assert "demo-001" not in ids(base)
    out = src.bind(ctx(q)).search(query, 3)
    assert ids(out) == ["demo-001", *ids(base)[:2]]
    # no support ids: the passages holding a gold answer, in corpus order
    no_support = q.model_copy(update={"support": []})
    holding = [p.doc_id for p in bm.index.passages if holds_answer(p, q.gold_answers)]
    assert ids(src.bind(ctx(no_support)).search(query, 3))[: min(3, len(holding))] == holding[:3]
    # unanswerable (no gold, no support): the base list as it is
    assert ids(src.bind(ctx(demo["demo-u01"])).search(query, 3)) == ids(base)


def test_oracle_refuses_a_question_without_gold_passages(bm, demo):
    src = OracleSourceSpec(base="bm").open_over("o", bm)
    lost = demo["demo-a01"].model_copy(update={"support": [], "gold_answers": ["Xyzzyplugh"]})
    with pytest.raises(OracleRefused, match=r'"o" \(oracle\): question demo-a01 has no gold passage') as exc:
        src.bind(ctx(lost)).search(QUERY, 3)
    assert "\n" not in str(exc.value)


def test_withheld_drops_the_gold_passages_and_refills_from_further_down(bm, demo):
    src = WithheldSourceSpec(base="bm").open_over("w", bm)
    q = demo["demo-a01"]  # Canberra; support demo-001; Melbourne's passage also names Canberra
    base = bm.search(QUERY, 8)
    assert ids(base)[:4] == ["demo-002", "demo-001", "demo-058", "demo-062"] and "demo-003" in ids(base)
    out = src.bind(ctx(q)).search(QUERY, 3)
    assert ids(out) == ["demo-002", "demo-058", "demo-062"]  # Sydney stays: on topic, no answer
    assert [d.score for d in out] == [base[0].score, base[2].score, base[3].score]
    assert all(d.source == "w" for d in out)
    deeper = src.bind(ctx(q)).search(QUERY, 6)
    assert ids(deeper) == [i for i in ids(base) if i not in ("demo-001", "demo-003")][:6]
    # a support id is withheld even when its passage does not hold the answer
    sydney = q.model_copy(update={"support": ["demo-002"]})
    assert ids(src.bind(ctx(sydney)).search(QUERY, 2)) == ["demo-058", "demo-062"]
    # unanswerable (no gold, no support): the base list as it is
    assert ids(src.bind(ctx(demo["demo-u01"])).search(QUERY, 3)) == ids(base)[:3]


def test_withheld_leaves_no_answerable_demo_question_its_answer():
    from branchpoint.retrieval.sources import DenseSourceSpec

    dense = DenseSourceSpec(corpus="demo", encoder="minilm-onnx").open("d")
    src = WithheldSourceSpec(base="d").open_over("w", dense)
    answered = 0
    for q in load_questions("demo"):
        if not q.answerable:
            continue
        answered += any(holds_answer(d, q.gold_answers) for d in dense.search(q.question, 3))
        out = src.bind(ctx(q)).search(q.question, 3)
        assert len(out) == 3, q.id  # a dense ranking always has more passages to refill from
        assert not any(holds_answer(d, q.gold_answers) or d.doc_id in q.support for d in out), q.id
    assert answered >= 45  # the clean source does show most of them their answer


def spec_with(sources: dict, default: str, seed: int = 0) -> ExperimentSpec:
    return ExperimentSpec(name="iv", seed=seed, retrieval=RetrievalSpec(default=default, sources=sources))


def test_the_retrieval_cache_key_names_the_intervention_seed_and_question(tmp_path, demo):
    sources = {"bm": BM25SourceSpec(), "rnd": RandomSourceSpec(base="bm"), "rnd2": RandomSourceSpec(base="bm")}
    spec = spec_with(sources, "rnd")
    pool = SourcePool(progress=False, cache_path=tmp_path / "cache.sqlite")
    a, u = demo["demo-a01"], demo["demo-u01"]
    tool = pool.search_tool(spec, a)
    first = tool.run(QUERY)
    assert first.cache_hit is False
    again = pool.search_tool(spec, a).run(QUERY)  # a fork of the same execution: the cached evidence
    assert again.cache_hit is True and ids(again.docs) == ids(first.docs)
    other = pool.search_tool(spec, u).run(QUERY)  # another question: its own key, its own draw
    assert other.cache_hit is False and ids(other.docs) != ids(first.docs)
    reseeded = pool.search_tool(spec_with(sources, "rnd", seed=7), a).run(QUERY)
    assert reseeded.cache_hit is False
    bound = pool.get("rnd", sources["rnd"], sources, context_of(a, 0))
    assert "intervention=random" in bound.params and "question=demo-a01" in bound.params and "seed=0" in bound.params
    pool.close()


def test_spec_refuses_bad_intervention_settings():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="p"):
        NoisySourceSpec(base="bm")
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        NoisySourceSpec(base="bm", p=1.5)
    spec = spec_with({"bm": BM25SourceSpec(), "o": OracleSourceSpec(base="nope")}, "o")
    with pytest.raises(InputError, match=r"retrieval.sources.o.base: unknown source 'nope' \(known: bm, o\)"):
        spec.retrieval.sources["o"].check_base("o", dict(spec.retrieval.sources))
    chained = {"bm": BM25SourceSpec(), "e": EmptySourceSpec(), "o": OracleSourceSpec(base="e")}
    with pytest.raises(InputError, match="'e' is itself an intervention"):
        chained["o"].check_base("o", chained)
