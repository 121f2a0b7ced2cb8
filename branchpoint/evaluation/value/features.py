"""Public-prefix and metadata features of saved states, for the fitted forecasters.

Search-value study, Appendix B ("Historical and public-input controls"): public-prefix features
include both forecast probabilities, log question and tool-text lengths, the lexical evidence
gap and query / document novelty. The gap is the fraction of question terms absent from the
tool text; query novelty is one minus the Jaccard overlap of the last query with the previous
queries; document novelty is the fraction of new document identifiers in the last search; both
novelties are zero before two searches. Metadata ridge uses evaluator-side task information
(dataset family, comparison membership, hop count): here the state's stratum and boundary kind.

Everything here reads the public history only: the parent execution's steps before the
checkpoint (`llm.public_history`), never a continuation's outcome.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from branchpoint.evaluation.judges import normalize_answer
from branchpoint.evaluation.value.outcomes import StateTable

if TYPE_CHECKING:
    from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.traces import ExecutionRecord, Step

PREFIX_FEATURES: tuple[str, ...] = (
    "log_question_chars",
    "log_tool_text_chars",
    "evidence_gap",
    "query_novelty",
    "document_novelty",
)


def terms(text: str | None) -> set[str]:
    """The normalised word set of a text (SQuAD normalisation, split on spaces)."""
    return set(normalize_answer(text or "").split())


def evidence_gap(question: str, tool_text: str) -> float:
    """Fraction of the question's terms absent from the tool text (1.0 with no tool text; 0.0 for
    a question without terms)."""
    q = terms(question)
    if not q:
        return 0.0
    return len(q - terms(tool_text)) / len(q)


def query_novelty(queries: Sequence[str]) -> float:
    """1 − Jaccard(terms of the last query, terms of all previous queries); 0 before two searches."""
    if len(queries) < 2:
        return 0.0
    last = terms(queries[-1])
    before = set().union(*(terms(q) for q in queries[:-1]))
    union = last | before
    return 1.0 - (len(last & before) / len(union) if union else 1.0)


def document_novelty(doc_ids: Sequence[Sequence[str]]) -> float:
    """Fraction of the last search's document ids not returned by an earlier search; 0 before two
    searches (or when the last search returned nothing)."""
    if len(doc_ids) < 2 or not doc_ids[-1]:
        return 0.0
    seen = set().union(*(set(d) for d in doc_ids[:-1]))
    return sum(1 for d in doc_ids[-1] if d not in seen) / len(doc_ids[-1])


def prefix_row(question: str, history: Sequence[Step]) -> list[float]:
    """The public-prefix features (`PREFIX_FEATURES`) of one state."""
    searches = [s for s in history if s.kind == "search"]
    tool_text = "\n".join(doc.text for s in searches for doc in s.retrieved)
    return [
        math.log1p(len(question or "")),
        math.log1p(len(tool_text)),
        evidence_gap(question, tool_text),
        query_novelty([s.query or "" for s in searches]),
        document_novelty([[doc.doc_id for doc in s.retrieved] for s in searches]),
    ]


def prefix_features(states: StateTable, parents: Mapping[str, ExecutionRecord]) -> np.ndarray:
    """(n states × 5) public-prefix features, `PREFIX_FEATURES` order. A state whose parent
    execution is not at hand (no executions.jsonl) gets the features of an empty history."""
    from branchpoint.evaluation.value.llm import public_history

    rows = []
    for i, (parent_id, _) in enumerate(states.keys):
        history = public_history(parents.get(parent_id), states.prefix_steps[i])
        rows.append(prefix_row(states.question[i], history))
    return np.array(rows, dtype=float).reshape(len(states), len(PREFIX_FEATURES))


def state_texts(states: StateTable, parents: Mapping[str, ExecutionRecord]) -> list[str]:
    """The text a frozen text encoder reads per state: the question at an initial checkpoint, the
    question and the public history (`llm.describe_history`) at later ones (search-value study,
    Appendix B, "Text and public-signal models")."""
    from branchpoint.evaluation.value.llm import describe_history, public_history

    out = []
    for i, (parent_id, _) in enumerate(states.keys):
        history = public_history(parents.get(parent_id), states.prefix_steps[i])
        text = states.question[i]
        if history:
            text += "\n" + describe_history(list(history))
        out.append(text)
    return out


def one_hot(labels: Sequence[str]) -> np.ndarray:
    """Indicator columns of the sorted distinct labels."""
    uniq = sorted(set(labels))
    return np.array([[1.0 if lab == u else 0.0 for u in uniq] for lab in labels], dtype=float).reshape(
        len(labels), len(uniq)
    )


def metadata_features(states: StateTable | DevView) -> np.ndarray:
    """Evaluator-side metadata of every state: one-hot stratum (the task: dataset family,
    comparison membership, hop count where the stratum names them) and one-hot boundary kind."""
    return np.concatenate(
        [one_hot(states.stratum.astype(str).tolist()), one_hot(states.boundary_kind.astype(str).tolist())], axis=1
    )
