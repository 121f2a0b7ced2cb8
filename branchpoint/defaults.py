"""Defaults that several layers share, each defined once: the judge a command uses when none is
named, the TPC weights and the sampling of fork branches. Imports nothing, so the command line,
the spec and the evaluation can all read them without loading each other."""

from __future__ import annotations

RULE_JUDGE = "rule"
"""The offline rule judge's registered name (gold matching and abstention rules; no model)."""
DEFAULT_JUDGE = RULE_JUDGE
"""The judge every command, API and spec uses when none is named: the rule judge."""

FORK_TEMPERATURE = 0.6
"""Sampling temperature of every fork branch unless the fork plan says otherwise (the seed study's
actor setting; repeats are independent draws at this temperature)."""
FORK_TOP_P = 0.95
"""Nucleus sampling (top-p) of every fork branch unless the fork plan says otherwise."""

DEFAULT_LAMBDA: float = 0.25
"""TPC weight λ of one input token (a generated token weighs 1): the over-searching study's 0.25
(§3.2, GPT-4o-mini's input / output price ratio)."""
DEFAULT_MU: float = 500.0
"""TPC weight μ of one search call, in tokens: the over-searching study's 500 (§3.2)."""
