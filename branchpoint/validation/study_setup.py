"""What one validation study runs: its settings (`StudySettings`), its question set with a
stratum on every question, its experiment spec (`study_spec`: the simulated model, the two BM25
sources, a seeded question sample), and the opener that points every run at the one shared
simulated server.

The study (`study`), its sweep run (`sweep`), its truth (`truth_setup`) and the findings
(`findings`) all start from these, so they sit below all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchpoint.defaults import FORK_TEMPERATURE, FORK_TOP_P
from branchpoint.experiments.spec import (
    AgentSpec,
    BM25SourceSpec,
    ExperimentSpec,
    QuestionsSpec,
    RetrievalSpec,
    SampleSpec,
)
from branchpoint.models.openai_compat import OpenAICompatibleClient
from branchpoint.models.spec import ModelSpec, SimServerSpec
from branchpoint.sim.truth import POLICY_STYLES

#: The two retrieval sources of a validation study (BM25 over the demo corpus, two settings).
MAIN_SOURCE, ALT_SOURCE = "main", "alt"
#: The strata of a validation's questions (`stratified_questions`).
STRATA = ("answerable", "unanswerable")


@dataclass(frozen=True)
class StudySettings:
    """What every study of one validation shares (seeds differ between studies)."""

    profile: str
    policy: str
    questions: str = "demo"
    answerable: int = 8  # questions whose executions are forked
    unanswerable: int = 8
    run_factor: int = 3  # the run has this many times as many questions (metrics on all of them)
    search_cap: int = 3
    repeats: int = 4
    search_budget: int = 2
    temperature: float = FORK_TEMPERATURE
    top_p: float = FORK_TOP_P
    reasoning_effort: str | None = None
    resamples: int = 2000
    concurrency: int = 8
    top_k: int = 2
    #: Diagnostic: fork each action with its own model seed (the pipeline's forks give every action
    #: of a repeat the same seed; see BENCHMARKS.md "Validation on the simulated model").
    seed_per_action: bool = False
    #: The fork plan's seed (`ForkPlan.seed`, the base of every branch's seed). Another value draws
    #: every branch afresh on the same run, states and truth: a diagnostic that tells an error
    #: of the truth for a study's states (it stays) from the chance of its draws (it does not).
    fork_seed: int = 0

    @property
    def chat(self) -> bool:
        return POLICY_STYLES.get(self.policy) != "completion"


def stratified_questions(path: Path, questions: str = "demo") -> Path:
    """A copy of the question set whose every question carries a stratum, `answerable` or
    `unanswerable`, so that a study's stratum-balanced estimates have two strata to balance
    (the demo set has none: one stratum would leave the balancing untested)."""
    from branchpoint.datasets import load_questions

    lines = [
        json.dumps(q.model_copy(update={"stratum": STRATA[0] if q.answerable else STRATA[1]}).model_dump())
        for q in load_questions(questions)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def available(questions: str, answerable: bool) -> int:
    """How many answerable (or unanswerable) questions the set has."""
    from branchpoint.datasets import load_questions

    return sum(q.answerable == answerable for q in load_questions(questions))


def study_spec(settings: StudySettings, seed: int, served_name: str) -> ExperimentSpec:
    """The experiment spec of one study (seeded questions sample, model seed, sampling)."""
    chat = settings.chat
    model = ModelSpec(
        provider="sim",
        name=served_name,
        style="chat" if chat else "completion",
        temperature=settings.temperature,
        seed=seed * 1000,
        max_tokens=1024 if chat else 48,
        top_p=settings.top_p,
        reasoning_effort=settings.reasoning_effort,
        sim=SimServerSpec(profile=settings.profile, questions=settings.questions, latency_scale=0.0),
    )
    sources = {
        MAIN_SOURCE: BM25SourceSpec(corpus="demo"),
        ALT_SOURCE: BM25SourceSpec(corpus="demo", index_params={"k1": 0.6, "b": 0.3}),
    }
    return ExperimentSpec(
        name=f"validate-{settings.profile}-{seed}",
        seed=seed,
        questions=QuestionsSpec(
            path=settings.questions,
            sample=SampleSpec(
                answerable=min(settings.answerable * settings.run_factor, available(settings.questions, True)),
                unanswerable=min(settings.unanswerable * settings.run_factor, available(settings.questions, False)),
            ),
        ),
        model=model,
        agent=AgentSpec(
            policy=settings.policy,
            search=True,
            search_cap=settings.search_cap,
            top_k=settings.top_k,
            answer_max_tokens=1024 if chat else 48,
        ),
        retrieval=RetrievalSpec(default=MAIN_SOURCE, sources=sources),
    )


def shared_server_opener(base_url: str) -> Any:
    """A model opener that talks to one already running simulated server (all studies share it)."""

    @contextmanager
    def opener(spec: ExperimentSpec, run_dir: Path) -> Iterator[OpenAICompatibleClient]:
        yield OpenAICompatibleClient(spec.model, base_url=base_url)

    return opener
