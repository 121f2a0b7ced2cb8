"""The runs one viewer answers from (`ViewerState`): the first run's index and any shown beside
it, their forecasts (read on first use), and the `?run=K` a request names. Shared by the server's
API routes and the static export, which write the same views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.views import state_forecasts

#: A run's forecasts per state (checkpoint) and a message per unreadable forecast line.
Forecasts = tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]


class ViewerState:
    """The runs the API answers from (the first, `index`, and any `more` shown beside it), their
    forecasts (forecasts files are read on first use)."""

    def __init__(
        self,
        index: RunIndex,
        extra_forecasts: list[Path] | None = None,
        *,
        more: list[RunIndex] | None = None,
    ) -> None:
        for path in extra_forecasts or []:
            if not Path(path).is_file():
                raise InputError(f"--forecasts {path}: file not found (expected a forecasts .jsonl, as for `value`)")
        self.index = index
        self.runs: list[RunIndex] = [index, *(more or [])]
        self.extra = extra_forecasts or []
        self._forecasts: dict[int, Forecasts] = {}

    def forecasts(self, run: int = 0) -> Forecasts:
        """Run `run`'s forecasts per state and its forecast problems (read once, then kept)."""
        if run not in self._forecasts:
            self._forecasts[run] = state_forecasts(self.runs[run], self.extra)
        return self._forecasts[run]

    def run_named(self, raw: str) -> tuple[int, RunIndex]:
        """The run a request's `run` parameter names (`"0"` for the first) and its index;
        ValueError naming the range when it is not a whole number below the number of runs."""
        if not raw.isdigit() or int(raw) >= len(self.runs):
            raise ValueError(f"run: expected 0 to {len(self.runs) - 1}")
        return int(raw), self.runs[int(raw)]

    def summary(self, run: int) -> dict[str, Any]:
        """What the page's header shows for run `run`: its index's summary, its forecast
        problems, and its position."""
        out = self.runs[run].summary()
        out["forecast_problems"] = self.forecasts(run)[1]
        out["run"] = run
        return out

    def start(self) -> ViewerState:
        """Start every run's index in the background."""
        for index in self.runs:
            if index._thread is None and not index.progress.done:
                index.start()
        return self
