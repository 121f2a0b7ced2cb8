"""The LLM judges' prompts and reply parsing: versioned `JudgePrompt`s (answer, abstention with
the over-searching study's scenarios, evidence for unanswerable and answerable questions), the
retry message, and `parse_label`, which reads the final `LABEL: <LABEL>` line robustly.

A prompt's `version` keys the judgment cache: change the text, change the version.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from branchpoint.evaluation.judges import ABSTENTION_LABELS, ANSWER_LABELS, EVIDENCE_LABELS


@dataclass(frozen=True)
class JudgePrompt:
    """A versioned judge prompt: bump `version` whenever `template` changes (it keys the cache)."""

    kind: str
    version: str
    labels: tuple[str, ...]
    template: str

    def render(self, inputs: dict[str, Any]) -> str:
        return self.template.format(**{k: _show(v) for k, v in inputs.items()})


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return "; ".join(str(v) for v in value) or "(none)"
    return str(value).strip() or "(empty)"


_FINAL_LINE = "Think in at most two sentences, then end with a final line of exactly the form\n"

#: The evidence labels' definitions and answer format, shared by both evidence prompts.
_EVIDENCE_LABELS = (
    "POSITIVE: the document supports or seems to support an answer to the question: it "
    "offers a fact, name, date or claim a reader could take as the answer, or it is on "
    "topic without casting doubt.\n"
    "NEGATIVE: the document signals uncertainty, contradiction or unknowability: it says the "
    "answer is unknown, disputed or unrecorded, contradicts the question's premise, or shows "
    "the question is ambiguous.\n\n" + _FINAL_LINE + "LABEL: POSITIVE\nor LABEL: NEGATIVE"
)

ANSWER_PROMPT_V1 = JudgePrompt(
    kind="answer",
    version="answer-v1",
    labels=ANSWER_LABELS,
    template=(
        "You are grading an AI assistant's response to a question against its gold answers.\n\n"
        "Question: {question}\n"
        "Gold answers (any one is right): {gold_answers}\n"
        "Response: {response}\n\n"
        "CORRECT: the response contains a gold answer (or the same fact in other words: spelling "
        "variants, abbreviations, extra precision) and contradicts none. A hedged answer that "
        'contains a gold answer ("I think it is X, but I am not sure") is CORRECT.\n'
        "INCORRECT: the response states an answer that is not a gold answer or that contradicts "
        "the gold answers, even when hedged; naming several contradicting candidates is "
        "INCORRECT.\n"
        'NOT_ATTEMPTED: the response gives no answer: "I don\'t know", a refusal, a request for '
        "clarification, or nothing.\n\n" + _FINAL_LINE + "LABEL: CORRECT\nor LABEL: INCORRECT\nor LABEL: NOT_ATTEMPTED"
    ),
)

#: What makes each category unanswerable, shown to the abstention judge.
SCENARIOS: dict[str | None, str] = {
    "AU": "answer unknown: nobody knows the answer, it was never recorded, or it is unknowable",
    "FP": "false premise: the question assumes something that is not true",
    "UC": "underspecified: the question lacks the context needed to pick one answer",
    None: "the question cannot be answered as asked (unknown answer, false premise, or missing context)",
}

ABSTENTION_PROMPT_V1 = JudgePrompt(
    kind="abstention",
    version="abstention-v1",
    labels=ABSTENTION_LABELS,
    template=(
        "You are judging whether an AI assistant, which could search the web, abstained on a "
        "question that cannot be answered as asked.\n\n"
        "Question: {question}\n"
        "Why it cannot be answered: {scenario}\n"
        "Response: {response}\n\n"
        "ABSTAINED: the response does at least one of these:\n"
        "- says it does not know, or that the answer is unknown, unrecorded or unknowable;\n"
        "- asks for clarification, says the question is ambiguous, or answers several readings "
        "of it separately;\n"
        "- questions or corrects the question's false assumption (answering the flawed question "
        "as if its premise were true is NOT abstaining);\n"
        "- stops and says the question cannot be answered, e.g. that searching found no reliable "
        "answer.\n"
        "ANSWERED: the response commits to an answer to the question as asked (even a hedged "
        "one) and does none of the above.\n\n" + _FINAL_LINE + "LABEL: ABSTAINED\nor LABEL: ANSWERED"
    ),
)

EVIDENCE_PROMPT_V1 = JudgePrompt(
    kind="evidence",
    version="evidence-v1",
    labels=EVIDENCE_LABELS,
    template=(
        "You are labelling one retrieved document for a question that cannot be answered as "
        "asked (its answer is unknown, it rests on a false premise, or it is underspecified).\n\n"
        "Question: {question}\n"
        "Document: {document}\n\n" + _EVIDENCE_LABELS
    ),
)

EVIDENCE_ANSWERABLE_PROMPT_V1 = JudgePrompt(
    kind="evidence",
    version="evidence-answerable-v1",
    labels=EVIDENCE_LABELS,
    template=(
        "You are labelling one retrieved document for a question.\n\n"
        "Question: {question}\n"
        "Document: {document}\n\n" + _EVIDENCE_LABELS
    ),
)

#: Prompts by the key the judge asks for: a judgment kind, or `evidence_answerable` (the
#: evidence prompt used on answerable questions).
DEFAULT_PROMPTS: dict[str, JudgePrompt] = {
    **{p.kind: p for p in (ANSWER_PROMPT_V1, ABSTENTION_PROMPT_V1, EVIDENCE_PROMPT_V1)},
    "evidence_answerable": EVIDENCE_ANSWERABLE_PROMPT_V1,
}

RETRY_MESSAGE = (
    "Your reply did not end with a line of the form `LABEL: <label>` naming exactly one of: {labels}. "
    "Reply with that one line only."
)

# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_LABEL_LINE = re.compile(r"\blabel\s*[:=]\s*(.*)$", re.IGNORECASE)


def _labels_in(fragment: str, labels: Sequence[str]) -> list[str]:
    """Valid labels occurring as whole words in `fragment` ("not attempted" = NOT_ATTEMPTED)."""
    padded = "_" + re.sub(r"[^A-Z]+", "_", fragment.upper()).strip("_") + "_"
    return [label for label in labels if f"_{label}_" in padded]


def parse_label(text: str | None, labels: Sequence[str]) -> str | None:
    """The label a judge reply gives, or None when it gives none unambiguously.

    Accepted: the last line of the form `LABEL: X` (any case, markdown around it, `=` for `:`)
    that names exactly one valid label; else a reply whose last non-empty line is exactly one
    label. `<think>…</think>` blocks are ignored; an unclosed `<think>` means no answer yet.
    """
    if not text:
        return None
    text = _THINK.sub("", text)
    if "<think>" in text.lower():
        return None
    lines = [ln.strip().strip("*`_#> \t").strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    for line in reversed(lines):
        match = _LABEL_LINE.search(line)
        if match:
            found = _labels_in(match.group(1), labels)
            if len(found) == 1:
                return found[0]
    if lines:
        last = lines[-1].rstrip(".!").strip("*`_ ")
        found = _labels_in(last, labels)
        if len(found) == 1 and re.sub(r"[^A-Z]+", "_", last.upper()).strip("_") == found[0]:
            return found[0]
    return None
