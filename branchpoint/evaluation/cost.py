"""Cost of an execution and Tokens Per Correctness (TPC): the TPC weights λ and μ
(`MetricsConfig`, its defaults `branchpoint.defaults.DEFAULT_LAMBDA` / `DEFAULT_MU`), `cost_channels`, `execution_cost`, `tpc_value`.

Over-searching study §3.2: Cost(q) = g_q + λ·x_q + μ·|S_q| with generated tokens g (output
tokens, reasoning included as servers count it), input tokens x and search calls |S|, the three
cost channels (generated, input, search); TPC(D) = Σ_q Cost(q) / Σ_q Correct(q), +inf when
nothing is correct. λ = 0.25 is GPT-4o-mini's input / output price ratio, μ = 500 one search
call's price in output tokens; the spec's `evaluation` section and the commands' `--lam` / `--mu`
default to these (the one definition).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from branchpoint.defaults import DEFAULT_LAMBDA, DEFAULT_MU

COST_CHANNELS: tuple[str, ...] = ("generated", "input", "search")


class MetricsConfig(BaseModel):
    """TPC weights (λ per input token, μ per search call; generated tokens weigh 1) and the bootstrap."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lam: float = Field(DEFAULT_LAMBDA, ge=0, description="weight λ of one input token")
    mu: float = Field(DEFAULT_MU, ge=0, description="weight μ of one search call, in tokens")
    bootstrap: int = Field(1000, ge=0, description="bootstrap resamples over questions (0: no intervals)")
    seed: int = Field(0, description="seed of the bootstrap's numpy Generator")
    confidence: float = Field(0.95, gt=0, lt=1, description="coverage of the percentile intervals")


def cost_channels(g: Any, x: Any, s: Any, cfg: MetricsConfig) -> tuple[Any, Any, Any]:
    """The three cost channels of an execution: (g, λ·x, μ·|S|) — generated, input, search."""
    return g, cfg.lam * x, cfg.mu * s


def execution_cost(g: Any, x: Any, s: Any, cfg: MetricsConfig) -> Any:
    """Cost of an execution in tokens: g + λ·x + μ·|S| (works on numbers and numpy arrays)."""
    gen, inp, search = cost_channels(g, x, s, cfg)
    return gen + inp + search


def tpc_value(total_cost: float, n_correct: float) -> float:
    """Tokens Per Correctness from sums: TPC = Σ_q cost_q / Σ_q correct_q, +inf when nothing is correct."""
    return math.inf if n_correct == 0 else float(total_cost) / float(n_correct)
