"""Agreement between judges: pairwise percent agreement and Cohen's κ, per judgment kind.

Every pair of judges present in the judged records is compared on the items both labelled:

- `answer` and `abstention`: one item per execution (the judge's last label of that kind);
- `evidence`: one item per (execution, doc_id);
- `decisive`: one item per execution, the label that decides correctness (`answer` for
  answerable questions, `abstention` for unanswerable ones) — the comparison the seed study
  reports (89.4 % / 92.3 % between LLM judges, 84 % with humans).

Items are left out when either label is UNPARSEABLE, or the execution is `incomplete`. The
`given` judge is a copy of other judges' labels, so it takes no part. Cohen's
κ = (p_o − p_e) / (1 − p_e) with p_o the observed agreement and p_e = Σ_k p1(k)·p2(k) the
agreement expected from each judge's label frequencies; κ is None when p_e = 1 (both judges
used one and the same label throughout, so chance explains everything).

Two views the over-searching study reports (Appendix C) are added:

- `averages`: with three or more judges, the average pairwise agreement (and κ) per kind over
  all pairs (`mean_pairwise`; the study: 89.4 % answer, 92.3 % abstention over three judges);
- `vs_reference`: the direction of disagreements between a reference judge (people, by
  default the judge named `human`) and each other judge (`disagreement_direction`; the study:
  10 of 16 disagreements were the LLM judge seeing an abstention the human did not).
Each pair also carries `a_yes_b_no` / `a_no_b_yes`: items where only judge A (or only B) gave
the kind's *positive* label (`POSITIVE_LABELS`: ABSTAINED, CORRECT, the correct decisive label,
NEGATIVE evidence).

`disagreements` lists where they differ, item by item (`DISAGREEMENT_KINDS`: per execution,
not per document): the pair, the kind, the execution id and both labels, so a rule judge and
an LLM judge run on the same traces can be read side by side where they part.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from branchpoint.evaluation.judges import UNPARSEABLE, needed_kind
from branchpoint.traces import ExecutionRecord

KINDS: tuple[str, ...] = ("decisive", "answer", "abstention", "evidence")
EXCLUDED_JUDGES: frozenset[str] = frozenset({"given"})
#: The label of each kind whose over- or under-use a disagreement's direction reports.
POSITIVE_LABELS: dict[str, frozenset[str]] = {
    "decisive": frozenset({"CORRECT", "ABSTAINED"}),
    "answer": frozenset({"CORRECT"}),
    "abstention": frozenset({"ABSTAINED"}),
    "evidence": frozenset({"NEGATIVE"}),
}
DEFAULT_REFERENCE = "human"
#: The kinds whose disagreeing items are listed (evidence, one item per document, is not).
DISAGREEMENT_KINDS: tuple[str, ...] = ("decisive", "answer", "abstention")


def cohen_kappa(labels_a: list[str], labels_b: list[str]) -> float | None:
    """Cohen's κ of two equally long label lists; None when undefined (no items, or p_e = 1)."""
    n = len(labels_a)
    if n == 0 or n != len(labels_b):
        return None
    observed = sum(a == b for a, b in zip(labels_a, labels_b)) / n
    freq_a, freq_b = Counter(labels_a), Counter(labels_b)
    expected = sum(freq_a[k] * freq_b[k] for k in freq_a) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def _items(record: ExecutionRecord) -> dict[str, dict[tuple[str, str], str]]:
    """judge -> {(kind, item id): label}, the last label per item."""
    out: dict[str, dict[tuple[str, str], str]] = {}
    for i, j in enumerate(record.judgments):
        if j.judge in EXCLUDED_JUDGES:
            continue
        label = j.label.strip().upper()
        item: tuple[str, str]
        if j.kind == "evidence":
            item = (j.kind, f"{record.execution_id}/{getattr(j, 'doc_id', None) or i}")
        else:
            item = (j.kind, record.execution_id)
        labels = out.setdefault(j.judge, {})
        labels[item] = label
        if j.kind == needed_kind(record):
            labels[("decisive", record.execution_id)] = label
    return out


def disagreement_direction(reference: list[str], other: list[str], kind: str) -> dict[str, Any]:
    """Which way two judges disagree on the same items, `reference` taken as right.

    Over-searching study, Appendix C.2 (human validation: of 16 disagreements, 10 were the LLM
    judge identifying abstention where the human did not). With P = `POSITIVE_LABELS[kind]`:
    other_yes_ref_no = #{i: other_i ∈ P, ref_i ∉ P}, other_no_ref_yes = #{i: other_i ∉ P,
    ref_i ∈ P}, n_disagree = #{i: other_i ≠ ref_i} and share_other_yes = other_yes_ref_no /
    n_disagree (None without disagreements). On the two-label kinds every disagreement is one
    of the two directions; on `answer` (three labels) and `decisive` some are neither
    (INCORRECT vs NOT_ATTEMPTED).
    """
    positive = POSITIVE_LABELS[kind]
    pairs = list(zip(reference, other, strict=True))
    n_disagree = sum(r != o for r, o in pairs)
    yes_no = sum(o in positive and r not in positive for r, o in pairs)
    no_yes = sum(o not in positive and r in positive for r, o in pairs)
    return {
        "n": len(pairs),
        "n_disagree": n_disagree,
        "other_yes_ref_no": yes_no,
        "other_no_ref_yes": no_yes,
        "share_other_yes": yes_no / n_disagree if n_disagree else None,
    }


def mean_pairwise(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Average pairwise agreement per kind over three or more judges.

    Over-searching study, Appendix C.1 (inter-judge validation, three judges): for the set P of
    judge pairs that labelled common items of a kind, mean agreement = (1/|P|) Σ_{(a,b)∈P}
    agreement_ab, and likewise mean κ over the pairs where κ is defined. Kinds with fewer than
    three judges are left out (one pair is no average).
    """
    out = []
    for kind in KINDS:
        rows = [p for p in pairs if p["kind"] == kind and p["agreement"] is not None]
        judges = sorted({p["judge_a"] for p in rows} | {p["judge_b"] for p in rows})
        if len(judges) < 3:
            continue
        kappas = [p["kappa"] for p in rows if p["kappa"] is not None]
        out.append(
            {
                "kind": kind,
                "judges": judges,
                "n_pairs": len(rows),
                "mean_agreement": sum(p["agreement"] for p in rows) / len(rows),
                "mean_kappa": sum(kappas) / len(kappas) if kappas else None,
                "n_items": [p["n"] for p in rows],
            }
        )
    return out


def judge_agreement(records: Iterable[ExecutionRecord], reference: str | None = None) -> dict[str, Any]:
    """{"judges", "pairs": [{judge_a, judge_b, kind, n, agreement, kappa, n_excluded, a_yes_b_no,
    a_no_b_yes}], "averages" (`mean_pairwise`), "reference", "vs_reference"
    (`disagreement_direction` of every other judge against `reference`), "disagreements":
    [{judge_a, judge_b, kind, execution_id, label_a, label_b}] (kinds `DISAGREEMENT_KINDS`)}.

    `reference` defaults to the judge named "human" when it is present (else no reference view).
    """
    labels: dict[str, dict[tuple[str, str], str]] = {}
    for record in records:
        if record.status == "incomplete":
            continue
        for judge, items in _items(record).items():
            labels.setdefault(judge, {}).update(items)
    judges = sorted(labels)
    if reference is None and DEFAULT_REFERENCE in labels:
        reference = DEFAULT_REFERENCE
    pairs, vs_reference, disagreements = [], [], []
    for a, b in itertools.combinations(judges, 2):
        for kind in KINDS:
            shared = sorted(k for k in labels[a].keys() & labels[b].keys() if k[0] == kind)
            if not shared:
                continue
            kept = [k for k in shared if UNPARSEABLE not in (labels[a][k], labels[b][k])]
            la, lb = [labels[a][k] for k in kept], [labels[b][k] for k in kept]
            if kind in DISAGREEMENT_KINDS:
                disagreements += [
                    {"judge_a": a, "judge_b": b, "kind": kind, "execution_id": k[1], "label_a": x, "label_b": y}
                    for k, x, y in zip(kept, la, lb, strict=True)
                    if x != y
                ]
            agree = sum(x == y for x, y in zip(la, lb))
            direction = disagreement_direction(lb, la, kind)  # a as "other", b as reference
            pairs.append(
                {
                    "judge_a": a,
                    "judge_b": b,
                    "kind": kind,
                    "n": len(kept),
                    "agreement": agree / len(kept) if kept else None,
                    "kappa": cohen_kappa(la, lb),
                    "n_excluded": len(shared) - len(kept),
                    "a_yes_b_no": direction["other_yes_ref_no"],
                    "a_no_b_yes": direction["other_no_ref_yes"],
                }
            )
            if reference in (a, b) and kept:
                ref, other = (la, lb) if reference == a else (lb, la)
                vs_reference.append(
                    {"judge": b if reference == a else a, "kind": kind, **disagreement_direction(ref, other, kind)}
                )
    if reference is not None and reference not in labels:
        reference = None
    return {
        "judges": judges,
        "pairs": pairs,
        "averages": mean_pairwise(pairs),
        "reference": reference,
        "vs_reference": vs_reference,
        "disagreements": disagreements,
    }


def agreement_json(agreement: dict[str, Any]) -> str:
    return json.dumps(agreement, indent=2) + "\n"


def agreement_markdown(agreement: dict[str, Any]) -> str:
    """Markdown tables: the pairs (agreement in %, κ to three decimals, which way they differ),
    the averages over three or more judges, and the direction against the reference judge."""
    if not agreement["pairs"]:
        judges = ", ".join(agreement["judges"]) or "none"
        return f"No two judges labelled the same items (judges present: {judges})."
    lines = [
        "| judge A | judge B | kind | n | agreement | Cohen's κ | only A positive | only B positive | excluded |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in agreement["pairs"]:
        agree = "—" if p["agreement"] is None else f"{100 * p['agreement']:.1f}%"
        kappa = "—" if p["kappa"] is None else f"{p['kappa']:.3f}"
        lines.append(
            f"| {p['judge_a']} | {p['judge_b']} | {p['kind']} | {p['n']} | {agree} | {kappa} | "
            f"{p.get('a_yes_b_no', '—')} | {p.get('a_no_b_yes', '—')} | {p['n_excluded']} |"
        )
    if agreement.get("averages"):
        lines += [
            "",
            "Average pairwise agreement over three or more judges:",
            "",
            "| kind | judges | pairs | mean agreement | mean κ |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for a in agreement["averages"]:
            kappa = "—" if a["mean_kappa"] is None else f"{a['mean_kappa']:.3f}"
            lines.append(
                f"| {a['kind']} | {', '.join(a['judges'])} | {a['n_pairs']} | {100 * a['mean_agreement']:.1f}% | {kappa} |"
            )
    if agreement.get("vs_reference"):
        ref = agreement["reference"]
        lines += [
            "",
            f"Disagreements with the reference judge `{ref}` (positive = ABSTAINED, CORRECT, "
            "the correct decisive label, NEGATIVE evidence):",
            "",
            "| judge | kind | n | disagreements | judge positive, reference not | reference positive, judge not | share judge positive |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for d in agreement["vs_reference"]:
            share = "—" if d["share_other_yes"] is None else f"{100 * d['share_other_yes']:.0f}%"
            lines.append(
                f"| {d['judge']} | {d['kind']} | {d['n']} | {d['n_disagree']} | {d['other_yes_ref_no']} | "
                f"{d['other_no_ref_yes']} | {share} |"
            )
    return "\n".join(lines)
