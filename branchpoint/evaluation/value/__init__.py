"""Search value: forecasters of THINK / SEARCH success at saved states, scored against forks.

- `outcomes`: forked records → states with repeated rewards per role (T, S).
- `rewards`: the `@reward` registry: `correct`, `set_f1`.
- `scores`: Brier and its exact split, U-statistic θ̂, gain risk, gain variance, gain skill.
- `forecasters`: the `@forecaster` registry, baselines, forecast files, calibration maps.
- `dev_view`: what forecasters see (`DevView`: public columns of every state, dev outcomes only).
- `llm`: the LLM forecaster (public history → JSON q_think, q_search).
- `routers`: threshold, two-probe consistency, sample-informed, decision factorial
  (`split_rule`), constant, oracle; utility.
- `signal_routers`: confidence, entropy, novelty and evidence-gap routers (dev-chosen τ).
- `derived`: the two-probe router's token accounting; the share recovered by task priors.
- `heads`: forest and fine-tuned MiniLM heads; `supervision`: the supervision-subset study.
- `audit_sample`: a sampled audit's inclusion probabilities and the source-supported subset.
- `bootstrap`: vectorised stratum-balanced bootstrap over support components (within strata).
- `features`, `fitted`: public-prefix / metadata features; fitted forecasters and maps (ridge,
  beta, direct gain, residual, STOP feedback, MiniLM head).
- `objectives`: reference equivalence vs containment vs exact match on the same executions.
- `audit`: shared-label audit bounds; three-pair composition.
- `curves`: matched-configuration learning curves.
- `seed_analyses`: paired router differences, `simultaneous` (max-standardised) intervals,
  `strata_panels`, `gain_spread` (SD of gains, repeat noise), `power`, `failures` (rates).
- `scoring`: `state_columns` and `score` (the score sections); `decision_factorial`: its cells,
  fixed terms and section; `json_numbers`: `num`, `interval_of` (NaN → null, ±inf → "inf").
- `study`: `value_study` (what `branchpoint value` runs) → value.json; `markdown`: its report.
See docs/search-value.md.
"""

from branchpoint.evaluation.value.audit import (
    brier_contrast,
    gain_contrast,
    shared_label_bounds,
    three_pair_composition,
)
from branchpoint.evaluation.value.bootstrap import bootstrap_means, percentile_interval, single_component_strata
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.curves import learning_curves
from branchpoint.evaluation.value.dev_view import DevView
from branchpoint.evaluation.value.forecasters import (
    Forecast,
    calibrator,
    calibrators,
    forecaster,
    read_forecasts,
    registered_forecasters,
)
from branchpoint.evaluation.value.llm import llm_forecasts, parse_forecast
from branchpoint.evaluation.value.objectives import objective_comparison
from branchpoint.evaluation.value.outcomes import RoleOutcomes, Roles, StateTable, build_states, dev_split
from branchpoint.evaluation.value.rewards import answer_items, reward, set_f1
from branchpoint.evaluation.value.routers import consistency, sample_informed, split_rule
from branchpoint.evaluation.value.scores import (
    brier,
    brier_split,
    gain_r2,
    gain_risk,
    gain_variance,
    level_split,
    oracle_bound,
    oracle_range,
    theta_hat,
    unbiased_square,
    utility,
)
from branchpoint.evaluation.value.study import load_states, value_study
from branchpoint.evaluation.value.value_file import ValueReport, read_value

__all__ = [
    "DevView",
    "Forecast",
    "RoleOutcomes",
    "Roles",
    "StateTable",
    "ValueConfig",
    "ValueReport",
    "answer_items",
    "bootstrap_means",
    "brier",
    "brier_contrast",
    "brier_split",
    "build_states",
    "calibrator",
    "calibrators",
    "consistency",
    "dev_split",
    "forecaster",
    "gain_contrast",
    "gain_r2",
    "gain_risk",
    "gain_variance",
    "learning_curves",
    "level_split",
    "llm_forecasts",
    "load_states",
    "objective_comparison",
    "oracle_bound",
    "oracle_range",
    "parse_forecast",
    "percentile_interval",
    "read_forecasts",
    "read_value",
    "registered_forecasters",
    "reward",
    "sample_informed",
    "set_f1",
    "shared_label_bounds",
    "single_component_strata",
    "split_rule",
    "theta_hat",
    "three_pair_composition",
    "unbiased_square",
    "utility",
    "value_study",
]
