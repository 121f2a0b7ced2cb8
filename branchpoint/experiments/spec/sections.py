"""The spec's sections: questions, model, agent, retrieval, evaluation, multi-turn, run, and the whole
`ExperimentSpec` (unknown keys and wrong types are errors naming the field)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_serializer, model_validator

from branchpoint.defaults import DEFAULT_JUDGE, DEFAULT_LAMBDA, DEFAULT_MU
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.experiments.spec.fork import ForkPlan
from branchpoint.experiments.spec.run import RunSpec
from branchpoint.models.spec import ModelSpec
from branchpoint.retrieval.sources import DenseSourceSpec, SourceField, SourceSpec
from branchpoint.spec_paths import SpecPath

if TYPE_CHECKING:
    from branchpoint.evaluation.judges import BatchJudge


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SampleSpec(_Strict):
    """A balanced, seeded sample of the question set."""

    answerable: int = Field(ge=0)
    unanswerable: int = Field(0, ge=0)


class QuestionsSpec(_Strict):
    """Where the questions come from: `demo` (embedded) or a file in one of the known formats."""

    path: SpecPath = "demo"
    format: str = "auto"
    limit: int | None = Field(None, ge=1)
    categories: list[str] | None = None
    sample: SampleSpec | None = None
    split: str | None = Field(None, description="FreshQA files: keep one split (TEST or DEV).")


def _demo_sources() -> dict[str, SourceSpec]:
    """The default sources: one dense source over the embedded demo corpus."""
    return {"demo": DenseSourceSpec()}


class RetrievalSpec(_Strict):
    """Named sources, each of a registered source kind (`kind`, default dense: see
    `branchpoint.retrieval.sources`); `default` is the one the agent searches unless a fork
    switches it."""

    default: str = "demo"
    sources: dict[str, SourceField] = Field(default_factory=_demo_sources)


#: The largest `agent.search_cap`: beyond it an execution's checkpoints and graph recursion limit
#: grow without bound, and no study needs more than a few dozen searches.
MAX_SEARCH_CAP = 1000


class AgentSpec(_Strict):
    """The agent: its policy (registered name or `module:function`), search offer and limits."""

    policy: str = "constrained"
    search: bool = Field(True, description="Offer the search tool (false: the no-search base condition).")
    search_cap: int = Field(
        10,
        ge=0,
        le=MAX_SEARCH_CAP,
        description="Most searches per execution; then a forced answer (at most 1,000: each search is "
        "several saved states, and the graph's step limit grows with the cap).",
    )
    top_k: int = Field(3, ge=1)
    evidence_words: int = Field(60, ge=5, description="Words of each passage shown to the model.")
    answer_max_tokens: int | None = Field(None, ge=1, description="Default: model.max_tokens.")
    malformed_retries: int = Field(1, ge=0)
    prompt: Literal["plain", "abstention", "fewshot", "self_eval"] = Field(
        "abstention",
        description="Prompt variant of the chat policies (the mitigation study).",
    )
    protocol: Literal["chat", "searchr1"] = Field(
        "chat",
        description="How the tagged policy sends its transcript: `chat` (a system prompt, a message per "
        "turn) or `searchr1` (Search-R1's own prompt and rollout: one sequence with each search's "
        "`<information>` block inline, continued by the server).",
    )
    budget_disclosure: Literal["hidden", "start", "every_step"] = Field(
        "hidden",
        description="What the model is told of its budgets: `hidden` (nothing), `start` (the search cap, and the "
        "token budget if set, once in the prompt), `every_step` (that, and after every search how many "
        "searches, and tokens, are left). See docs/agents.md, Budget disclosure and token budget.",
    )
    token_budget: int | None = Field(
        None,
        ge=1,
        description="Most generated tokens per execution (completion tokens of every model call, reasoning "
        "included, as the server counts them); checked before each decision: once reached, the answer is "
        "forced as at the search cap (recorded as forced_by: token_budget). null: no token budget.",
    )

    @model_validator(mode="after")
    def _searchr1_is_the_tagged_policy(self) -> AgentSpec:
        if self.protocol == "searchr1":
            if self.policy != "tagged":
                raise ValueError(
                    f"protocol searchr1 is a transcript of the tagged policy (got policy {self.policy!r}); "
                    "set agent.policy: tagged"
                )
            if self.prompt != "abstention":
                raise ValueError(
                    f"protocol searchr1 sends Search-R1's own prompt, so agent.prompt {self.prompt!r} does not "
                    "apply; leave agent.prompt unset"
                )
            if not self.search:
                raise ValueError(
                    "protocol searchr1 sends Search-R1's prompt word for word, and that prompt offers search, so "
                    "agent.search: false would tell the model it may search; for a no-search condition use "
                    "agent.policy: no_search (or agent.protocol: chat)"
                )
        return self

    @model_serializer(mode="wrap")
    def _dump_new_fields_if_set(self, handler: Any) -> Any:
        """`protocol`, `budget_disclosure` and `token_budget` are dumped only when set otherwise
        than their defaults: condition fingerprints (and so execution ids) of earlier specs do not
        change."""
        data = handler(self)
        if isinstance(data, dict):
            for name, default in _NEW_FIELD_DEFAULTS.items():
                if name in data and data[name] == default:
                    del data[name]
        return data


#: Agent fields added after runs were recorded, with the default a dump leaves out.
_NEW_FIELD_DEFAULTS: dict[str, Any] = {"protocol": "chat", "budget_disclosure": "hidden", "token_budget": None}


class MultiTurnSpec(_Strict):
    """Earlier turns before each evaluated question: how many, and of which kind.

    The earlier questions are drawn (seeded) from the whole question file (not the selection); their answers are the
    gold answer (answerable) or an abstention (unanswerable): an oracle conversation history.
    """

    preceding: int = Field(0, ge=0, le=50)
    context: Literal["answerable", "mixed", "unanswerable"] = "mixed"


class EvaluationSpec(BaseModel):
    """How the run is scored (`branchpoint evaluate RUN_DIR` reads it; its options override it):
    `judge` names any registered judge (or `package.module:attr`), and the section's other keys
    are that judge's settings, e.g. `{judge: llm-answer, model: {name: Qwen/Qwen3-8B, base_url:
    http://127.0.0.1:8000/v1}}` (checked against the judge's settings when the spec is loaded)."""

    model_config = ConfigDict(extra="allow")

    judge: str = DEFAULT_JUDGE
    lam: float = Field(DEFAULT_LAMBDA, ge=0, description="TPC weight of an input token (λ).")
    mu: float = Field(DEFAULT_MU, ge=0, description="TPC weight of a search call (μ).")
    bootstrap: int = Field(1000, ge=0, description="Bootstrap resamples of questions (0: no intervals).")
    bootstrap_seed: int = Field(0, description="Seed of the bootstrap.")

    @property
    def judge_settings(self) -> dict[str, Any]:
        """The judge's settings: every key of the section besides the fields above."""
        return dict(self.model_extra or {})

    def open_judge(self, run_dir: Path, progress: bool = False, search_paths: Sequence[Path] = ()) -> BatchJudge:
        """The judge built with its settings (its cache, if any, in `run_dir`)."""
        from branchpoint.evaluation.judges import JudgeRun, build_judge
        from branchpoint.traces import JUDGE_CACHE_FILE

        return build_judge(
            self.judge,
            self.judge_settings,
            JudgeRun(Path(run_dir) / JUDGE_CACHE_FILE, progress),
            search_paths,
        )


class ExperimentSpec(_Strict):
    """A whole experiment: what to run on which questions, and the sweep axes."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    base_dir: str | None = Field(
        None,
        description="The folder relative paths and module:function names of this spec resolve against (default: "
        "the spec file's folder). `branchpoint run` writes it into the run folder's copy of the spec.",
    )
    seed: int = 0
    questions: QuestionsSpec = Field(default_factory=QuestionsSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    agent: AgentSpec = Field(default_factory=AgentSpec)
    retrieval: RetrievalSpec = Field(default_factory=RetrievalSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    multi_turn: MultiTurnSpec | None = None
    run: RunSpec = Field(
        default_factory=RunSpec,
        description="How often each question runs under each condition (`epochs`): draws, not conditions.",
    )
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    fork: ForkPlan | None = Field(
        None, description="A fork study `branchpoint run` does after the run; `branchpoint fork` starts from it."
    )
    value: ValueConfig | None = Field(
        None, description="The search-value scoring `branchpoint value` starts from (its options override it)."
    )

    _source_dir: Path | None = PrivateAttr(None)

    @model_serializer(mode="wrap")
    def _dump_run_if_set(self, handler: Any) -> Any:
        """`run` is dumped only when set otherwise than its defaults (one epoch): a spec that
        leaves it keeps the dump (its run folder's spec.yaml, its fingerprints) it had before."""
        data = handler(self)
        if isinstance(data, dict) and data.get("run") == RunSpec().model_dump():
            del data["run"]
        return data

    @model_validator(mode="after")
    def _sim_knows_the_run_questions(self) -> ExperimentSpec:
        """A simulated model whose question set is not given looks questions up in the run's own
        question file (`--set model.provider=sim` on any question set), not in the demo set."""
        if self.model.provider == "sim" and "questions" not in self.model.sim.model_fields_set:
            sim = self.model.sim.model_copy()
            sim.__dict__["questions"] = self.questions.path  # inherited: stays out of model_fields_set
            model = self.model.model_copy()
            model.__dict__["sim"] = sim
            self.__dict__["model"] = model
        return self

    def with_response_cache(self, folder: str | Literal[False] | None) -> ExperimentSpec:
        """This spec with `model.response_cache` set to `folder` (`--cache DIR`; False: off,
        `--no-cache`; None: as the spec has it). It changes no execution id (`MODEL_REACH`)."""
        if folder is None:
            return self
        model = self.model.model_copy(update={"response_cache": folder or None})
        return self.model_copy(update={"model": model})

    def drop_inherited_questions(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` (a dump of this spec) without an inherited `model.sim.questions`, so that a
        spec validated from it (paths resolved, a sweep value set) takes its own questions.path."""
        if "questions" not in self.model.sim.model_fields_set:
            data["model"]["sim"].pop("questions", None)
        return data

    @property
    def source_dir(self) -> Path | None:
        """The folder this spec's relative paths resolved against when it was loaded (its file's
        folder, or `base_dir`; None when built in code): `module:function` policies and
        components are imported from there too."""
        return self._source_dir
