"""`ValueConfig`: the settings of a search-value scoring run (`branchpoint value`), and how a
token price is written as a key of value.json."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from branchpoint.defaults import DEFAULT_JUDGE
from branchpoint.evaluation.fork_settings import ForkSettingsChoice
from branchpoint.evaluation.value import routers

DEFAULT_PRICES: tuple[float, ...] = (0.0, 0.001, 0.005, 0.01, 0.02)


class ValueConfig(BaseModel):
    """Settings of a search-value scoring run (all have the defaults the CLI shows): the spec's
    `value` section, which `branchpoint value` options override.

    `forecasters` and `calibrators` hold the settings of components that declare them
    (`@forecaster(name, settings=Model)`), by name, e.g. `{public_prefix_ridge: {folds: 3}}`;
    `forecaster_modules` are imported first (from the spec's folder or the working directory)
    so that their `@forecaster` functions are scored.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge: str = DEFAULT_JUDGE
    reward: str = "correct"
    dev_split: float = Field(0.3, ge=0.0, lt=1.0, description="fraction of support components used to fit")
    seed: int = 0
    resamples: int = Field(10_000, ge=0, description="bootstrap resamples (0: no intervals)")
    level: float = Field(0.95, gt=0.0, lt=1.0)
    prices: tuple[float, ...] = DEFAULT_PRICES
    taus: tuple[float, ...] = routers.TAU_GRID
    pending_roles: tuple[str, str] = ("STOP", "SEARCH")
    text_head: bool = Field(False, description="embed each state's public text with `encoder` for minilm_ridge")
    finetune_head: bool = Field(False, description="fine-tune the MiniLM head minilm_finetuned (heads.py) on dev texts")
    audit_judges: tuple[str, str] | None = Field(None, description="two judges whose disagreements bound the labels")
    audit_sample: str | None = Field(
        None, description="JSONL of audited questions: inclusion probability, source support (audit_sample.py)"
    )
    learning_curves: bool = Field(False, description="matched-configuration gain learning curves (curves.py)")
    curve_budgets: tuple[int, ...] = (20, 40, 80, 120, 240, 480, 800, 1100)
    curve_samples: int = Field(10, ge=1)
    supervision_history: str | None = Field(
        None, description="a historical fork study: fit on it vs on k target questions (supervision.py)"
    )
    supervision_budgets: tuple[int, ...] = (20, 40, 80, 120, 240)
    supervision_samples: int = Field(20, ge=1, description="training subsets per budget")
    three_pair_design: Literal["auto", "same_questions", "disjoint"] = Field(
        "auto", description="three-pair histories on the target's questions, or on disjoint dev questions"
    )
    decision_need: Literal["gain", "think_fails"] = Field(
        "gain",
        description="when search is needed at a state, for decision quality (decisions.py): gain = Ȳ_S − Ȳ_T > 0, "
        "think_fails = Ȳ_T < 0.5",
    )
    encoder: str = "minilm-onnx"
    forecasters: dict[str, dict[str, Any]] = Field(default_factory=dict, description="settings per forecaster name")
    calibrators: dict[str, dict[str, Any]] = Field(default_factory=dict, description="settings per calibration map")
    forecaster_modules: tuple[str, ...] = Field((), description="modules to import that register forecasters")
    fork_settings: str | None = Field(
        None, description="read only the branches of this fork fingerprint (or a unique start of it)"
    )
    mix_fork_settings: bool = Field(False, description="pool branches of different fork settings (refused by default)")

    def fork_choice(self) -> ForkSettingsChoice:
        """Which fork settings this scoring run reads (`evaluation.fork_settings.choose`)."""
        return ForkSettingsChoice(fingerprint=self.fork_settings, mix=self.mix_fork_settings)

    @field_validator("prices")
    @classmethod
    def _prices(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v or any(p < 0 or not math.isfinite(p) for p in v):
            raise ValueError("prices must be one or more non-negative numbers")
        return v


def price_key(price: float) -> str:
    """The key of a price in value.json: `0`, `0.001`, ..."""
    return f"{price:g}"
