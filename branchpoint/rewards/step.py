"""Step rewards from exported step labels (`branchpoint export labels`): what the first decision
a completion makes at a labelled state is worth.

A labelled state carries p̂_T and p̂_S (the success rates of THINK and SEARCH from that state
over the fork repeats, seed 002 §3.1 eq. (1)), their mean token costs, and whether search was
needed there (the interval of Δ above 0; `evaluation.value.labels`). Two modes:

- `value` (the default): the estimated success of the action taken, p̂_S when the completion
  searches first and p̂_T when it answers, less `price` · tokens / 1000 of that action: seed
  002's router utility U = Y − λ·T/1000 (§5.4) in expectation, a lower-variance reward than
  the rollout's own outcome;
- `label`: 1 when the decision agrees with the label (search where search was needed, answer
  where it was not), else 0.

A completion that makes no decision (an unclosed tag, empty text) gets 0 in both modes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from branchpoint.agents.protocols import DecisionKind

StepMode = Literal["value", "label"]
#: The label columns a step reward reads (columns of the exported labels).
LABEL_COLUMNS = ("p_think", "p_search", "tokens_think", "tokens_search", "search_needed")


def check_mode(mode: str) -> StepMode:
    """`mode`, checked: `value` or `label`."""
    if mode not in ("value", "label"):
        raise ValueError(f"step reward mode: expected 'value' or 'label', got {mode!r}")
    return mode  # type: ignore[return-value]


def step_score(
    action: DecisionKind | None, labels: Mapping[str, Any], mode: str = "value", price: float = 0.0
) -> float:
    """The step reward of deciding `action` at a state with these `labels` (a row of the
    exported labels, or any mapping with LABEL_COLUMNS); see the module docstring."""
    mode = check_mode(mode)
    missing = [c for c in LABEL_COLUMNS if c not in labels or labels[c] is None]
    if missing:
        raise ValueError(f"step reward: the state's labels lack {', '.join(missing)} (columns of `export labels`)")
    if action is None:
        return 0.0
    searched = action == "search"
    if mode == "label":
        return 1.0 if searched == bool(labels["search_needed"]) else 0.0
    p = float(labels["p_search"] if searched else labels["p_think"])
    tokens = float(labels["tokens_search"] if searched else labels["tokens_think"])
    return p - price * tokens / 1000.0
