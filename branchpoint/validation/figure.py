"""The figure of a validation: estimated Δ̄ against the true Δ, state by state (Agg canvas)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DELTA_FIGURE = "delta_states.png"


def delta_figure(report: dict[str, Any], path: Path) -> Path:
    """Scatter of Δ̄ (plug-in, m repeats) against the simulator's exact Δ for every state of every
    study, with the identity line; the title gives the profile, policy and the mean error."""
    xs, ys = [], []
    for study in report["per_study"]:
        for row in study["per_state"]:
            xs.append(row["delta"])
            ys.append(row["dbar"])
    fig = Figure(figsize=(5.2, 4.6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(xs, ys, s=10, alpha=0.35, color="#1f77b4", edgecolors="none")
    ax.plot([-1, 1], [-1, 1], color="#444", lw=1, ls="--", label="estimate = truth")
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("true Δ = p_S − p_T (simulator)")
    ax.set_ylabel(f"estimated Δ̄ = Ȳ_S − Ȳ_T (m = {report['settings']['repeats']})")
    bias = (sum(y - x for x, y in zip(xs, ys)) / len(xs)) if xs else float("nan")
    ax.set_title(
        f"{report['profile']} / {report['policy']}: {len(xs)} states, "
        f"{report['studies']} studies; mean error {bias:+.3f}",
        fontsize=9,
    )
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
