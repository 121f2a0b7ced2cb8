"""The spec's `run` section: how many independent executions (epochs) each question gets under
each condition, and the seed each epoch sends."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from branchpoint.errors import InputError

#: The most epochs a run may ask for (each is a whole pass over the questions of every condition).
MAX_EPOCHS = 1000


class RunSpec(BaseModel):
    """How a run repeats its executions: `epochs` independent draws per question and condition.

    Epochs are draws, not conditions: they share the condition (and its label), and epoch e is
    the record with `repeat = e` (the trace contract's field, as inspect_ai's epoch − 1). Epoch 0
    sends `model.seed` and keeps the execution id a run without epochs has; epoch e > 0 sends a
    seed derived from `model.seed` and e (`seed_of`), recorded as sent in the record's
    `sampling`. Like fork repeats, more than one epoch at temperature 0 would give copies of one
    draw and is refused unless `allow_identical_epochs` is set.
    """

    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(
        1,
        ge=1,
        le=MAX_EPOCHS,
        description="Independent executions of each question under each condition (sampled, each with its "
        "own recorded seed); metrics.json then reports pass@k, pass^k, flip rate and decision reliability.",
    )
    allow_identical_epochs: bool = Field(
        False,
        description="Allow epochs > 1 at model.temperature 0 (identical draws, e.g. to measure server nondeterminism).",
    )

    def seed_of(self, model_seed: int | None, epoch: int) -> int | None:
        """The request seed of one epoch: `model_seed` itself for epoch 0 (a run without epochs
        is epoch 0 of one with them); for epoch e > 0 a 31-bit hash of `model_seed` and e
        (distinct per epoch, the same on rerun, and unlike `model_seed + e` not the seed of
        another condition of a `model.seed` sweep). An unseeded model (`model.seed: null`)
        stays unseeded: its epochs draw from the server's own generator."""
        if model_seed is None or epoch == 0:
            return model_seed
        digest = hashlib.sha256(f"{model_seed}:epoch:{epoch}".encode()).digest()
        return int.from_bytes(digest[:4], "big") >> 1

    def check(self, temperature: float, source: str = "spec", condition: dict[str, Any] | None = None) -> None:
        """Refuse copies posing as epochs (epochs > 1 at temperature 0), before any work; the
        message names the fields (the rule and wording of `ForkPlan.check` for repeats)."""
        if self.epochs > 1 and temperature == 0 and not self.allow_identical_epochs:
            where = f" (sweep condition {condition})" if condition else ""
            raise InputError(
                f'{source}: field "run.epochs"{where}: run.epochs {self.epochs} at model.temperature 0: epochs '
                "are independent draws, but at temperature 0 every epoch is a copy of the first draw. Sample "
                "(e.g. model.temperature: 0.7), set run.epochs: 1, or run.allow_identical_epochs: true."
            )
