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
        if j.kind == "evidence":
            item = (j.kind, f"{record.execution_id}/{getattr(j, 'doc_id', None) or i}")
        else:
            item = (j.kind, record.execution_id)
        labels = out.setdefault(j.judge, {})
        labels[item] = label
        if j.kind == needed_kind(record):
            labels[("decisive", record.execution_id)] = label
    return out


def judge_agreement(records: Iterable[ExecutionRecord]) -> dict[str, Any]:
    """{"judges": [...], "pairs": [{judge_a, judge_b, kind, n, agreement, kappa, n_excluded}]}."""
    labels: dict[str, dict[tuple[str, str], str]] = {}
    for record in records:
        if record.status == "incomplete":
            continue
        for judge, items in _items(record).items():
            labels.setdefault(judge, {}).update(items)
    judges = sorted(labels)
    pairs = []
    for a, b in itertools.combinations(judges, 2):
        for kind in KINDS:
            shared = sorted(k for k in labels[a].keys() & labels[b].keys() if k[0] == kind)
            if not shared:
                continue
            kept = [k for k in shared if UNPARSEABLE not in (labels[a][k], labels[b][k])]
            la, lb = [labels[a][k] for k in kept], [labels[b][k] for k in kept]
            agree = sum(x == y for x, y in zip(la, lb))
            pairs.append({
                "judge_a": a, "judge_b": b, "kind": kind, "n": len(kept),
                "agreement": agree / len(kept) if kept else None,
                "kappa": cohen_kappa(la, lb), "n_excluded": len(shared) - len(kept),
            })  # fmt: skip
    return {"judges": judges, "pairs": pairs}


def agreement_json(agreement: dict[str, Any]) -> str:
    return json.dumps(agreement, indent=2) + "\n"


def agreement_markdown(agreement: dict[str, Any]) -> str:
    """A markdown table of the pairs (agreement in %, κ to three decimals)."""
    if not agreement["pairs"]:
        judges = ", ".join(agreement["judges"]) or "none"
        return f"No two judges labelled the same items (judges present: {judges})."
    lines = ["| judge A | judge B | kind | n | agreement | Cohen's κ | excluded |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for p in agreement["pairs"]:
        agree = "—" if p["agreement"] is None else f"{100 * p['agreement']:.1f}%"
        kappa = "—" if p["kappa"] is None else f"{p['kappa']:.3f}"
        lines.append(f"| {p['judge_a']} | {p['judge_b']} | {p['kind']} | {p['n']} | {agree} | {kappa} | {p['n_excluded']} |")
    return "\n".join(lines)
