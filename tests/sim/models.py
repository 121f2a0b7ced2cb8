"""The simulated instruct model as the sim-backed tests run it: chat, sampled (temperature 0.6,
seed 1), no latency, so one spec section serves every test that needs a real HTTP model."""

from __future__ import annotations

from branchpoint.models.spec import ModelSpec, SimServerSpec


def sim_instruct_model() -> ModelSpec:
    """`provider: sim` serving `branchpoint-sim-instruct` (chat, temperature 0.6, seed 1, 256 tokens)."""
    return ModelSpec(
        provider="sim",
        name="branchpoint-sim-instruct",
        style="chat",
        temperature=0.6,
        seed=1,
        max_tokens=256,
        sim=SimServerSpec(latency_scale=0.0),
    )
