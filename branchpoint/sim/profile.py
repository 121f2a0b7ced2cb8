"""Profiles of the simulated model: every parameter of its behaviour, with four built-ins.

A profile is a pydantic model (YAML or JSON file, or a built-in name). Probabilities are given at
the sampling temperature 1; a request's `temperature` and `top_p` reshape every categorical draw
(`behaviour.reshape`), and temperature 0 takes the most probable outcome. Logits are natural-log
odds. The built-ins:

- `instruct`: an instruct model without reasoning that searches when it lacks evidence, stops
  once it has a passage with the answer, and abstains on unanswerable questions about as often
  as the evidence warrants (negative evidence raises abstention, positive evidence lowers it).
- `over_searching`: a reasoning model (thinking on by default, effort `medium`) whose search
  propensity grows with reasoning effort and is higher on unanswerable questions, and whose
  abstention falls with every passage that looks like an answer (the over-searching pattern).
- `search_helps_little`: knows much already; a passage with the answer barely lifts it.
- `runs_past_search`: `instruct`, except that a tagged `<search>q</search>` turn goes on (an
  invented `<information>` block, then an answer) unless the request's `stop` ends it, as a
  model trained on Search-R1 transcripts does; the other profiles end the turn at `</search>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from branchpoint.errors import InputError

Effort = Literal["none", "low", "medium", "high"]
EFFORTS: tuple[str, ...] = ("none", "low", "medium", "high")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Knowledge(_Strict):
    """What the model knows about answerable questions, and what a gold-bearing passage adds."""

    prior: float = Field(0.3, ge=0, le=1, description="P(correct) with no gold-bearing passage shown.")
    prior_spread: float = Field(
        0.4,
        ge=0,
        le=1,
        description="Per-question priors spread uniformly over prior ± spread/2 (fixed by the question id).",
    )
    priors: dict[str, float] = Field(default_factory=dict, description="Per-question priors by question id.")
    gold_lift: float = Field(
        0.85,
        ge=0,
        le=1,
        description="With a gold-bearing passage shown, P(correct) = 1 − (1 − prior)(1 − gold_lift).",
    )


class Abstention(_Strict):
    """Abstention logits: by category (unanswerable), and per positive / negative passage shown."""

    unanswerable: dict[str, float] = Field(
        default_factory=lambda: {"AU": 0.8, "FP": 0.4, "UC": 1.2},
        description="Logit of abstaining on an unanswerable question of each category, no evidence shown.",
    )
    answerable: float = Field(
        -0.5, description="Logit of abstaining (vs a wrong answer) on an answerable question it does not get right."
    )
    per_negative: float = Field(1.2, description="Added to the logit per negative-evidence passage shown.")
    per_positive: float = Field(-0.5, description="Added to the logit per positive passage shown.")


class Search(_Strict):
    """Search propensity: logit of SEARCH (vs answer) when searching is allowed."""

    base: float = Field(1.0, description="Logit with no passage shown, answerable question, effort none.")
    effort: dict[str, float] = Field(
        default_factory=lambda: {"none": 0.0, "low": 0.0, "medium": 0.0, "high": 0.0},
        description="Added by reasoning effort.",
    )
    unanswerable: float = Field(0.0, description="Added on unanswerable questions.")
    gold_shown: float = Field(-3.0, description="Added when a gold-bearing passage is shown.")
    per_passage: float = Field(-0.6, description="Added per distinct passage shown.")
    scarcity: float = Field(
        -1.0,
        description="Added to the logit, divided by the searches left, when the request discloses how many are "
        "left (`agent.budget_disclosure`: the countdown of `every_step`, else the cap stated by `start`): told one "
        "search is left, the logit falls by 1; told ten, by 0.1. Nothing is added when no budget is disclosed.",
    )
    direct_query: float = Field(
        0.7,
        ge=0,
        le=1,
        description="P(the query is the question itself); else the question plus the last passage's title.",
    )


class Tokens(_Strict):
    """Reasoning tokens by effort: uniform on [lo, hi] (inclusive)."""

    reasoning: dict[str, tuple[int, int]] = Field(
        default_factory=lambda: {"none": (0, 0), "low": (20, 60), "medium": (60, 200), "high": (200, 600)},
    )
    #: Content tokens kept free of reasoning: a call truncates when reasoning exceeds max_tokens − this.
    content_reserve: int = Field(32, ge=1)


class Failures(_Strict):
    """Output failures per model call (none at temperature 0 and none under a grammar, but length)."""

    malformed: float = Field(0.02, ge=0, le=1, description="P(output no protocol can parse).")
    length: float = Field(0.01, ge=0, le=1, description="P(output cut off: finish_reason length).")


class Tagged(_Strict):
    """How a tagged-text (`<search>q</search>`) search turn ends."""

    stops_after_search: bool = Field(
        True,
        description="True: the turn ends at `</search>`. False: the model writes on, an invented "
        "`<information>` block and an answer, as models trained on Search-R1 transcripts do, until a stop "
        'string (`stop: ["</search>"]`) or max_tokens ends it.',
    )
    invented_tokens: int = Field(40, ge=0, description="Tokens of the invented `<information>` text.")


class Latency(_Strict):
    """Latency of one request: first token after base + prompt tokens × prefill; then per token."""

    base_s: float = Field(0.002, ge=0)
    prefill_s_per_token: float = Field(2e-6, ge=0)
    decode_s_per_token: float = Field(2e-4, ge=0)


class Capacity(_Strict):
    """Capacity mode (continuous batching): a shared decode budget of tokens per second.

    Every request in flight decodes at min(1 / decode_s_per_token, tokens_per_s / in-flight
    requests) tokens per second, and at most `max_batch` requests decode at once (the rest queue).
    """

    tokens_per_s: float = Field(5000.0, gt=0)
    max_batch: int = Field(256, ge=1)


class Profile(_Strict):
    """Every parameter of the simulated model's behaviour (see the module docstring)."""

    name: str
    description: str = ""
    model_name: str | None = Field(None, description="Served model id; default branchpoint-sim-<name>.")
    default_effort: Effort = Field("none", description="Effort when the request asks for none.")
    thinking_effort: Effort = Field("medium", description="Effort when a request turns thinking on without a level.")
    knowledge: Knowledge = Field(default_factory=Knowledge)
    abstention: Abstention = Field(default_factory=Abstention)
    search: Search = Field(default_factory=Search)
    tokens: Tokens = Field(default_factory=Tokens)
    failures: Failures = Field(default_factory=Failures)
    tagged: Tagged = Field(default_factory=Tagged)
    latency: Latency = Field(default_factory=Latency)
    capacity: Capacity = Field(default_factory=Capacity)

    @property
    def served_name(self) -> str:
        """The model id the server reports on /v1/models."""
        return self.model_name or f"branchpoint-sim-{self.name}"


BUILTIN_PROFILES: dict[str, Profile] = {
    "instruct": Profile(
        name="instruct",
        description="Instruct model, no reasoning: searches when it lacks evidence, abstains as the evidence warrants.",
    ),
    "over_searching": Profile(
        name="over_searching",
        description="Reasoning model that over-searches: propensity grows with effort and unanswerability; "
        "positive evidence talks it out of abstaining.",
        default_effort="medium",
        knowledge=Knowledge(prior=0.35, gold_lift=0.8),
        abstention=Abstention(
            unanswerable={"AU": 1.0, "FP": 0.6, "UC": 1.4}, answerable=-1.0, per_negative=1.0, per_positive=-0.8
        ),
        search=Search(
            base=1.5,
            effort={"none": -0.5, "low": 0.0, "medium": 0.8, "high": 1.6},
            unanswerable=1.0,
            gold_shown=-1.5,
            per_passage=-0.2,
            direct_query=0.6,
        ),
    ),
    "search_helps_little": Profile(
        name="search_helps_little",
        description="Knows much already; a gold-bearing passage barely helps.",
        knowledge=Knowledge(prior=0.6, prior_spread=0.3, gold_lift=0.1),
        search=Search(base=0.5, gold_shown=-0.5, per_passage=-0.4),
    ),
    "runs_past_search": Profile(
        name="runs_past_search",
        description="`instruct`, but a tagged search turn does not end at `</search>`: it writes an invented "
        "result and an answer unless a stop string ends it.",
        tagged=Tagged(stops_after_search=False),
    ),
}


def load_profile(name_or_path: str | Path) -> Profile:
    """A built-in profile by name, or a profile from a YAML / JSON file (errors name the field)."""
    key = str(name_or_path)
    if key in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[key]
    path = Path(key)
    if not path.is_file():
        raise InputError(
            f"--profile: {key!r} is neither a built-in profile ({', '.join(sorted(BUILTIN_PROFILES))}) nor a file"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of profile fields")
    named = "name" in data
    base = data.pop("extends", None)
    if base is not None:
        if base not in BUILTIN_PROFILES:
            raise InputError(f'{path}: field "extends": unknown profile {base!r}')
        merged = BUILTIN_PROFILES[base].model_dump()
        for k, v in data.items():
            merged[k] = {**merged[k], **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
        data = merged
    if not named:
        data["name"] = path.stem
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        from branchpoint.traces import describe_validation_error

        raise InputError(f"{path}: {describe_validation_error(exc)}") from None
