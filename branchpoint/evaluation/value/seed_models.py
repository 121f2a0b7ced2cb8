"""The value.json models of `seed_analyses`' sections (paired router differences, simultaneous
intervals, per-stratum panels, gain spread, power, failure rates), read by `ValueReport`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from branchpoint.evaluation.report_types import FileModel, Interval, Num


class Est(FileModel):
    value: Num | None = None
    interval: Interval = None


class Diff(FileModel):
    difference: Num | None = None
    interval: Interval = None


class RouterDifferences(FileModel):
    """Per price, 'R - reference': router R's utility minus a reference router's, paired."""

    references: list[str] = Field(default_factory=list)
    paired_over: str | None = None
    by_price: dict[str, dict[str, Diff]] = Field(default_factory=dict)


class SimultaneousMember(FileModel):
    difference: Num | None = None
    se: Num | None = None
    interval: Interval = None


class SimultaneousFamily(FileModel):
    what: str | None = None
    critical: Num | None = None
    members: dict[str, SimultaneousMember] = Field(default_factory=dict)
    excluded: dict[str, str] = Field(default_factory=dict)


class SimultaneousIntervals(FileModel):
    """Max-standardised bootstrap intervals over declared families of contrasts."""

    method: str | None = None
    level: Num = 0.95
    marginal_critical: Num | None = None
    families: dict[str, SimultaneousFamily] = Field(default_factory=dict)


class StrataPanels(FileModel):
    """Per panel, per entry, per stratum: an estimate and its interval."""

    strata: dict[str, dict[str, int]] = Field(default_factory=dict)
    no_interval: dict[str, str] = Field(default_factory=dict)
    level: Num = 0.95
    panels: dict[str, dict[str, dict[str, Est]]] = Field(default_factory=dict)


class SdDistribution(FileModel):
    resamples: int = 0
    mean: Num | None = None
    se: Num | None = None
    quantiles: dict[str, Num | None] = Field(default_factory=dict)
    undefined_share: Num | None = None
    histogram: dict[str, list[Any]] = Field(default_factory=dict)


class GainSpread(FileModel):
    """V_Δ and SD of gains, observed variance of Δ̄ and its repeat-noise part."""

    gain_variance: Est = Field(default_factory=Est)
    observed_variance: Est = Field(default_factory=Est)
    noise_variance: Est = Field(default_factory=Est)
    noise_share: Est = Field(default_factory=Est)
    gain_sd: Est = Field(default_factory=Est)
    observed_sd: Est = Field(default_factory=Est)
    formula: str | None = None
    sd_distribution: SdDistribution | None = None


class PowerContrast(FileModel):
    difference: Num | None = None
    sd: Num | None = None
    n: int = 0
    detectable_difference: Num | None = None
    power_at_difference: Num | None = None
    required_n: dict[str, int | None] = Field(default_factory=dict)
    design_effect: Num | None = None


class Power(FileModel):
    """The normal-approximation power calculation of each paired contrast."""

    alpha: Num = 0.05
    power: Num = 0.8
    deltas: list[Num] = Field(default_factory=list)
    formula: str | None = None
    assumption: str | None = None
    contrasts: dict[str, PowerContrast] = Field(default_factory=dict)


class FailureRow(FileModel):
    executions: int = 0
    ok: int = 0
    malformed: int = 0
    length: int = 0
    other: int = 0
    failed_reward: Num | None = None
    malformed_rate: Est = Field(default_factory=Est)
    length_rate: Est = Field(default_factory=Est)
    failed_rate: Est = Field(default_factory=Est)


class FailureRole(FileModel):
    actions: list[str] = Field(default_factory=list)
    rows: dict[str, FailureRow] = Field(default_factory=dict)


class FailureRates(FileModel):
    """Per role: counts and shares of malformed and length-limited executions."""

    incomplete_records: int = 0
    level: Num = 0.95
    by_role: dict[str, FailureRole] = Field(default_factory=dict)
