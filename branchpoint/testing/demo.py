"""The data the conformance kit exercises components on: the demo corpus and questions, a few
execution records of every shape a judge meets, and a small fork-study state table.

Everything is built here from the embedded demo data (no network, no model): the records and
the state table are hand-made, seeded, and the same on every call.
"""

from __future__ import annotations

import numpy as np

from branchpoint.datasets import load_questions
from branchpoint.datasets.questions import Question, demo_corpus_path
from branchpoint.evaluation.value.decision_logprobs import DECISION_FEATURES
from branchpoint.evaluation.value.decision_logprobs import FEATURE as DECISION_FEATURE
from branchpoint.evaluation.value.features import PREFIX_FEATURES
from branchpoint.evaluation.value.heads import TEXT_FEATURE
from branchpoint.evaluation.value.outcomes import RoleOutcomes, StateTable
from branchpoint.retrieval.corpus import Passage, load_corpus
from branchpoint.traces import ExecutionRecord, RetrievedDoc

#: Queries a source is asked (the demo corpus holds passages about each).
QUERIES: tuple[str, ...] = ("capital of Australia", "Who wrote Hamlet?", "largest planet")


def demo_passages() -> list[Passage]:
    """The demo corpus's passages."""
    return list(load_corpus(demo_corpus_path()))


def demo_question() -> Question:
    """The first answerable demo question."""
    return next(q for q in load_questions("demo") if q.answerable)


def sample_records() -> list[ExecutionRecord]:
    """Records of every shape a judge must label: a correct answer with evidence, a wrong
    answer, an abstention on an unanswerable question, and broken (`malformed`) and cut-off
    (`length`) outputs."""
    passages = demo_passages()[:2]
    docs = [
        RetrievedDoc(doc_id=p.doc_id, score=1.0 - i / 10, text=p.text, title=p.title or None, source="kit")
        for i, p in enumerate(passages)
    ]
    steps = [
        {
            "kind": "search",
            "query": "capital of Australia",
            "source": "kit",
            "retrieved": [d.model_dump() for d in docs],
        }
    ]

    def record(n: int, answer: str | None, *, answerable: bool = True, status: str = "ok") -> ExecutionRecord:
        return ExecutionRecord.model_validate(
            {
                "execution_id": f"kit-{n}",
                "run_id": "kit",
                "condition": {},
                "question_id": f"q{n}",
                "question": "What is the capital of Australia?",
                "answerable": answerable,
                "gold_answers": ["Canberra"] if answerable else [],
                "status": status,
                "final_answer": answer,
                "search_calls": 1,
                "steps": steps,
            }
        )

    return [
        record(0, "Canberra"),
        record(1, "Sydney"),
        record(2, "I don't know; nobody can say.", answerable=False),
        record(3, None, status="malformed"),
        record(4, "Canb", status="length"),
    ]


def _role(y: np.ndarray, tokens: np.ndarray) -> RoleOutcomes:
    return RoleOutcomes(
        [row for row in y],
        [row for row in tokens],
        [["Canberra" if v else "Sydney" for v in row] for row in y],
        None,
    )


def sample_states(n: int = 24, repeats: int = 4, seed: int = 0) -> StateTable:
    """A seeded state table of `n` states (half after a search), `repeats` draws of each action,
    two strata and one support component per question (two states each), with every public
    feature a shipped forecaster reads ("public_prefix", "minilm", the state texts, decision
    log probabilities)."""
    rng = np.random.default_rng(seed)
    kinds = np.array(["initial", "after_search_k"] * (n // 2) + ["initial"] * (n % 2), dtype=object)
    p_think = np.where(kinds == "initial", 0.3, 0.6)
    think_y = (rng.random((n, repeats)) < p_think[:, None]).astype(float)
    search_y = (rng.random((n, repeats)) < 0.55).astype(float)
    tokens = rng.integers(50, 400, size=(n, repeats)).astype(float)
    states = StateTable(
        keys=[(f"p{i // 2}", f"c{i}") for i in range(n)],
        question_id=[f"q{i // 2}" for i in range(n)],
        question=[f"Demo question {i // 2}?" for i in range(n)],
        stratum=np.array(["a" if i % 4 < 2 else "b" for i in range(n)], dtype=object),
        component=np.array([f"q{i // 2}" for i in range(n)], dtype=object),
        boundary=[str(k) for k in kinds],
        boundary_kind=kinds,
        t_action=["THINK"] * n,
        s_action=["SEARCH"] * n,
        prefix_steps=[0 if k == "initial" else 2 for k in kinds],
        search_budget=[3] * n,
        think=_role(think_y, tokens),
        search=_role(search_y, tokens * 1.5),
    )
    states.features["public_prefix"] = rng.random((n, len(PREFIX_FEATURES)))
    states.features["minilm"] = rng.standard_normal((n, 16))
    states.features[TEXT_FEATURE] = np.array(states.question, dtype=object)
    decisions = rng.random((n, len(DECISION_FEATURES)))
    decisions[:, DECISION_FEATURES.index("no_logprobs")] = 0.0  # every decide step has log probabilities
    states.features[DECISION_FEATURE] = decisions
    return states


def dev_mask(states: StateTable) -> np.ndarray:
    """The development rows of `sample_states`: the states of every other question (support
    components are never split between dev and test)."""
    return np.array([int(q[1:]) % 2 == 0 for q in states.question_id])
