"""The over-searching study's qualitative findings, reproduced on the simulator with branchpoint's metrics.

One run sweeps the search cap (0 = no search tool, 1, 3, 6) over the whole question set, on the
demo corpus plus templated negative-evidence documents for every other unanswerable question (as
`branchpoint augment` would add with a model; here written from a template so the study needs
no model), and checks with `compute_metrics`:

1. search raises answer accuracy (cap 3 vs no search) and lowers abstention accuracy;
2. TPC rises with the search cap while answer accuracy plateaus (cap 6 within 0.1 of cap 3);
3. unanswerable executions that retrieved only positive evidence abstain less often than those
   that retrieved only negative evidence.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from branchpoint.datasets import load_questions
from branchpoint.datasets.questions import demo_corpus_path
from branchpoint.defaults import RULE_JUDGE
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import MetricsConfig, compute_metrics
from branchpoint.experiments.runner import run_experiment
from branchpoint.experiments.spec import BM25SourceSpec, QuestionsSpec, RetrievalSpec
from branchpoint.sim.profile import Profile
from branchpoint.traces import EXECUTIONS_FILE, read_records
from branchpoint.validation.checks import Check
from branchpoint.validation.study_setup import MAIN_SOURCE, StudySettings, shared_server_opener, study_spec

CAPS = (0, 1, 3, 6)

NEGATIVE_TEMPLATE = (
    "There is no reliable information that answers the question {q!r}. Historians and reference "
    "works agree that this remains unknown, and the available records are disputed."
)


def augmented_corpus(path: Path, questions: str = "demo") -> Path:
    """The demo corpus plus one templated negative-evidence document for every other unanswerable
    question (so that some unanswerable executions retrieve only positive evidence, some negative)."""
    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()
    unanswerable = [q for q in load_questions(questions) if not q.answerable]
    for i, q in enumerate(unanswerable):
        if i % 2 == 0:
            title = q.question.rstrip("?")
            lines.append(
                json.dumps({"id": f"neg-{q.id}-0", "contents": f'"{title}"\n' + NEGATIVE_TEMPLATE.format(q=q.question)})
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _label(cap: int) -> str:
    return f"agent.search_cap={cap}"


def seed_findings(
    out: Path, settings: StudySettings, profile: Profile, *, seed: int, base_url: str | None = None
) -> tuple[dict[str, Any], list[Check]]:
    """Run the cap sweep on the simulator and check the three findings (see the module docstring)."""
    from branchpoint.models.spec import SimServerSpec
    from branchpoint.sim import SimServer

    shutil.rmtree(out, ignore_errors=True)
    corpus = augmented_corpus(out / "corpus.jsonl", settings.questions)
    spec = study_spec(replace(settings, answerable=1, unanswerable=1), seed, profile.served_name)
    spec = spec.model_copy(
        update={
            "name": f"findings-{profile.name}",
            "questions": QuestionsSpec(path=settings.questions),
            "retrieval": RetrievalSpec(default=MAIN_SOURCE, sources={MAIN_SOURCE: BM25SourceSpec(corpus=str(corpus))}),
            "sweep": {"agent.search_cap": list(CAPS)},
        }
    )
    run_dir = out / "run"

    def run(url: str) -> None:
        run_experiment(
            spec, run_dir, progress=False, model_opener=shared_server_opener(url), concurrency=settings.concurrency
        )

    if base_url is None:
        with SimServer(
            SimServerSpec(profile=settings.profile, latency_scale=0.0),
            served_name=profile.served_name,
            log_path=out / "sim-server.log",
        ) as server:
            run(server.base_url)
    else:
        run(base_url)
    records = judge_records(read_records(run_dir / EXECUTIONS_FILE), RULE_JUDGE)
    m = compute_metrics(records, RULE_JUDGE, MetricsConfig(bootstrap=0))
    by = m["by_condition"]
    acc = {c: by[_label(c)]["answer_accuracy"] for c in CAPS}
    abst = {c: by[_label(c)]["abstention_accuracy"] for c in CAPS}
    tpc = {c: by[_label(c)]["tpc"] for c in CAPS}
    groups = (m.get("evidence_balance") or {}).get("groups") or {}
    pos = (groups.get("only_positive") or {}).get("abstention_accuracy")
    neg = (groups.get("only_negative") or {}).get("abstention_accuracy")
    checks = [
        Check(
            "finding: search raises answer accuracy",
            "seed study",
            acc[3] > acc[0],
            f"answer accuracy {acc[0]:.2f} without search → {acc[3]:.2f} at cap 3",
        ),
        Check(
            "finding: search lowers abstention accuracy",
            "seed study",
            abst[3] < abst[0],
            f"abstention accuracy {abst[0]:.2f} without search → {abst[3]:.2f} at cap 3",
        ),
        Check(
            "finding: TPC rises with the cap",
            "seed study",
            float(tpc[6]) > float(tpc[1]),
            f"TPC {float(tpc[1]):.0f} at cap 1 → {float(tpc[6]):.0f} at cap 6",
        ),
        Check(
            "finding: accuracy plateaus",
            "seed study",
            abs(acc[6] - acc[3]) <= 0.1,
            f"answer accuracy {acc[3]:.2f} at cap 3, {acc[6]:.2f} at cap 6",
        ),
        Check(
            "finding: only-positive < only-negative abstention",
            "seed study",
            pos is not None and neg is not None and pos < neg,
            f"abstention accuracy {pos} with only positive evidence, {neg} with only negative",
        ),
    ]
    findings = {
        "answer_accuracy": acc,
        "abstention_accuracy": abst,
        "tpc": tpc,
        "abstention_by_evidence": {
            "only_positive": pos,
            "only_negative": neg,
            "n_only_positive": (groups.get("only_positive") or {}).get("n"),
            "n_only_negative": (groups.get("only_negative") or {}).get("n"),
        },
    }
    return findings, checks
