"""Measure an offline judge against human labels: load a labelled set of responses, judge each
as an execution record, and report agreement and Cohen's κ per label.

The labelled set is JSON lines, one response per line, with the fields

- `id` (str), `split` ("dev" or "heldout"): rules are tuned on dev only; held-out measures;
- `source` (str): where the question comes from (`coconot:<id>`, `nq_open_dev`, `demo:<id>`,
  `bamboogle:<idx>`, `hotpotqa:<id>`, `constructed`, ...);
- `question` (str), `answerable` (bool), `category` ("AU" / "FP" / "UC", null if answerable),
  `gold_answers` (list of str; empty for unanswerable questions);
- `response` (str): the final answer being judged;
- `label_abstained` (bool): a careful reader's verdict that the response withholds an answer
  (says it does not know, asks for clarification, answers several readings, corrects the
  premise, refuses);
- `label_correct` (bool for answerable questions, null otherwise): the reader's verdict that
  the response gives a gold answer without contradicting it;
- `tag` (str): the kind of response (premise_correction, confident_negation, hedge_right, ...);
- `batch` (int, default 1): when the item was written: 1 for the first set (dev and the first
  held-out part), 2 for the second held-out batch (written and labelled before the rules were
  run on it, committed before any later rule change), 3 for more dev responses written after it
  for error analysis, 4 for the adversarial batch (its own file, judge_labels_adversarial.jsonl:
  hedges that commit, contradicting candidates, units and number words, attempted hedges,
  every reading of an underspecified question; labels committed before the rules ran on it).

Agreement on *abstention* compares `label_abstained` with the judge's `abstention` label
(ABSTAINED) on every item; agreement on *correctness* compares `label_correct` with the judge's
`answer` label (CORRECT) on answerable items. κ is Cohen's κ (`agreement.cohen_kappa`).
Agreement gets a Wilson 95% interval (`evaluation.wilson.wilson_interval`), κ a percentile bootstrap 95%
interval over resampled items (`kappa_bootstrap_interval`, seeded, so reproducible).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.errors import InputError
from branchpoint.evaluation.agreement import cohen_kappa
from branchpoint.evaluation.judges import build_judge
from branchpoint.evaluation.wilson import wilson_interval
from branchpoint.traces import ExecutionRecord

SPLITS: tuple[str, ...] = ("dev", "heldout")


class LabelledResponse(BaseModel):
    """One line of the labelled set (see the module docstring for the fields' meaning)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    split: str
    source: str
    question: str
    answerable: bool
    category: str | None = None
    gold_answers: list[str] = []
    response: str
    label_abstained: bool
    label_correct: bool | None = None
    tag: str = ""
    batch: int = 1


def read_labels(path: str | Path) -> list[LabelledResponse]:
    """The labelled responses in `path`; InputError naming the line and field on bad input."""
    path = Path(path)
    items = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = LabelledResponse.model_validate(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path} line {lineno}: not JSON ({exc.msg})") from None
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(p) for p in err["loc"]) or "(line)"
                raise InputError(f'{path} line {lineno}: field "{field}": {err["msg"]}') from None
            if item.split not in SPLITS:
                raise InputError(f'{path} line {lineno}: field "split" is "{item.split}" (expected dev or heldout)')
            if item.answerable != (item.label_correct is not None):
                raise InputError(
                    f'{path} line {lineno}: field "label_correct" must be true/false for answerable '
                    "questions and null for unanswerable ones"
                )
            if not item.answerable and item.category not in ("AU", "FP", "UC"):
                raise InputError(
                    f'{path} line {lineno}: field "category" must be AU, FP or UC for unanswerable questions'
                )
            items.append(item)
    return items


def as_record(item: LabelledResponse) -> ExecutionRecord:
    """The labelled response as a finished (status ok) execution record, ready for a judge."""
    return ExecutionRecord(
        execution_id=item.id,
        run_id="judge-labels",
        question_id=item.id,
        question=item.question,
        answerable=item.answerable,
        category=item.category,
        gold_answers=item.gold_answers,
        final_answer=item.response,
    )


def kappa_bootstrap_interval(
    pairs: list[tuple[bool, bool]], *, resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> list[float] | None:
    """Percentile bootstrap interval of Cohen's κ for paired yes/no labels (reader, judge).

    Items are resampled with replacement `resamples` times (numpy generator seeded by `seed`);
    κ = (p_o − p_e) / (1 − p_e) with p_e = p_r·p_j + (1 − p_r)(1 − p_j) from each resample's
    yes-rates; resamples where κ is undefined (p_e = 1) are dropped. None when n = 0 or κ is
    never defined.
    """
    n = len(pairs)
    if n == 0:
        return None
    reader = np.array([h for h, _ in pairs], dtype=float)
    judge = np.array([j for _, j in pairs], dtype=float)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    r, j = reader[idx], judge[idx]
    p_o = (r == j).mean(axis=1)
    p_r, p_j = r.mean(axis=1), j.mean(axis=1)
    p_e = p_r * p_j + (1 - p_r) * (1 - p_j)
    defined = p_e < 1.0
    if not defined.any():
        return None
    kappa = (p_o[defined] - p_e[defined]) / (1 - p_e[defined])
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(kappa, [tail, 100 - tail])
    return [float(lo), float(hi)]


def _score(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    n = len(pairs)
    human = ["Y" if h else "N" for h, _ in pairs]
    judge = ["Y" if j else "N" for _, j in pairs]
    return {
        "n": n,
        "agreement": sum(h == j for h, j in pairs) / n if n else None,
        "agreement_ci": wilson_interval(sum(h == j for h, j in pairs), n),
        "kappa": (kappa := cohen_kappa(human, judge)),
        "kappa_ci": kappa_bootstrap_interval(pairs) if kappa is not None else None,
        "judge_yes_human_no": sum(j and not h for h, j in pairs),
        "judge_no_human_yes": sum(h and not j for h, j in pairs),
    }


def judge_agreement_with_labels(items: Iterable[LabelledResponse], judge: str = DEFAULT_JUDGE) -> dict[str, Any]:
    """Agreement and κ of a registered judge with the labels: abstention on all items and on
    the unanswerable ones, correctness on the answerable ones, plus the disagreeing item ids."""
    judge_obj = build_judge(judge)
    abst_all, abst_unans, correct = [], [], []
    disagreements = []
    for item in items:
        labels = {j.kind: j.label for j in judge_obj.judge_many([as_record(item)])[0]}
        abstained = labels["abstention"] == "ABSTAINED"
        abst_all.append((item.label_abstained, abstained))
        if not item.answerable:
            abst_unans.append((item.label_abstained, abstained))
        if abstained != item.label_abstained:
            disagreements.append(
                {"id": item.id, "kind": "abstention", "human": item.label_abstained, "judge": abstained}
            )
        if item.answerable:
            is_correct = labels["answer"] == "CORRECT"
            correct.append((bool(item.label_correct), is_correct))
            if is_correct != item.label_correct:
                disagreements.append(
                    {"id": item.id, "kind": "correct", "human": item.label_correct, "judge": is_correct}
                )
    return {
        "judge": judge,
        "abstention": _score(abst_all),
        "abstention_unanswerable": _score(abst_unans),
        "correct": _score(correct),
        "disagreements": disagreements,
    }


def agreement_table(result: dict[str, Any]) -> str:
    """A markdown table of `judge_agreement_with_labels`: n, agreement, κ and the disagreements' direction."""
    lines = [
        "| measure | n | agreement [Wilson 95%] | Cohen's κ [bootstrap 95%] | judge yes / reader no | judge no / reader yes |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    names = {
        "abstention": "abstention (all responses)",
        "abstention_unanswerable": "abstention (unanswerable)",
        "correct": "correctness (answerable)",
    }
    for key, name in names.items():
        s = result[key]
        kappa = "—" if s["kappa"] is None else f"{s['kappa']:.3f}"
        if s["kappa"] is not None and s["kappa_ci"] is not None:
            kappa += f" [{s['kappa_ci'][0]:.3f}, {s['kappa_ci'][1]:.3f}]"
        lo, hi = s["agreement_ci"] or (math.nan, math.nan)
        lines.append(
            f"| {name} | {s['n']} | {100 * s['agreement']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] | {kappa} | "
            f"{s['judge_yes_human_no']} | {s['judge_no_human_yes']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # python -m branchpoint.evaluation.judge_labels LABELS.jsonl [judge]
    import sys

    labelled = read_labels(sys.argv[1])
    parts = {split: [i for i in labelled if i.split == split] for split in SPLITS}
    for batch in sorted({i.batch for i in parts["heldout"]}):
        parts[f"heldout batch {batch}"] = [i for i in parts["heldout"] if i.batch == batch]
    for name, part in parts.items():
        print(f"\n{name} ({len(part)} responses)\n")
        print(agreement_table(judge_agreement_with_labels(part, sys.argv[2] if len(sys.argv) > 2 else DEFAULT_JUDGE)))
