"""What every figure module shares: numbers read from metrics (`num`, `finite`, `pct`, error bars
from intervals), short condition labels, and writing a figure as PNG + SVG (`save_figure`, marked
when the model was simulated) with its numbers as CSV (`write_csv`).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from branchpoint.evaluation.report_types import FileModel


def num(value: Any) -> float | None:
    """A number from metrics or metrics.json ("inf" strings included); None stays None."""
    if value is None:
        return None
    return float(value)


def finite(value: Any) -> float | None:
    """A number from metrics, None when it is missing or not finite (nothing to draw)."""
    v = num(value)
    return v if v is not None and math.isfinite(v) else None


def error_bar(value: Any, ci: Any, scale: float = 1.0) -> tuple[float, float]:
    """Asymmetric error-bar half-widths of a value from its interval (0 when unknown or infinite)."""
    v = finite(value)
    if v is None or not ci:
        return 0.0, 0.0
    lo, hi = finite(ci[0]), finite(ci[1])
    if lo is None or hi is None:
        return 0.0, 0.0
    return max(0.0, v - lo) * scale, max(0.0, hi - v) * scale


def pct(value: Any) -> float:
    """A share as a percentage to plot; NaN (a gap in the line) when it is missing or not finite."""
    v = finite(value)
    return math.nan if v is None else 100.0 * v


#: What every figure of a simulated model's run says (in its title).
SIMULATED_NOTE = "(simulated model)"


def mark_simulated(fig: Figure) -> None:
    """Put "(simulated model)" in the figure's title: its suptitle, else its one axes' title,
    else a line under the figure (a reader of a pasted figure sees where the numbers came from)."""
    title = fig.get_suptitle()
    if title:
        for text in fig.texts:  # the suptitle's Text: set in place, keeping its size and place
            if SIMULATED_NOTE not in title and text.get_text() == title:
                text.set_text(f"{title} {SIMULATED_NOTE}")
                break
        return
    if len(fig.axes) == 1 and fig.axes[0].get_title():
        ax = fig.axes[0]
        if SIMULATED_NOTE not in ax.get_title():
            ax.title.set_text(f"{ax.get_title()} {SIMULATED_NOTE}")
        return
    fig.text(0.99, 0.0, SIMULATED_NOTE, ha="right", va="top", fontsize=8, style="italic")


def save_figure(fig: Figure, path: Path, simulated: bool = False) -> Path:
    """Write the figure as PNG at `path` and as SVG beside it ("(simulated model)" in its title
    when `simulated`)."""
    if simulated:
        mark_simulated(fig)
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    with rc_context({"svg.fonttype": "none"}):  # text stays text: editable, searchable
        fig.savefig(path.with_suffix(".svg"), bbox_inches="tight")
    return path


def section_key(key: str) -> str:
    """A dotted setting with its section kept: `retrieval.default` stays, `retrieval.sources.x.chunk_words`
    becomes `x.chunk_words` (the last two parts)."""
    return ".".join(key.split(".")[-2:])


def short(label: str, width: int = 28) -> str:
    """`agent.search=true,model.name=x` with each key cut to its section and setting
    (`retrieval.default=clean`, never a bare `default=clean`), cut to `width` characters."""
    parts = []
    for part in label.split(","):
        key, sep, value = part.partition("=")
        parts.append(f"{section_key(key)}={value}" if sep else part)
    text = ",".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def integer_ticks(ax: Any) -> None:
    """Counts (search caps, turns, searches) get whole-number ticks only."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def stat_of(m: FileModel | None, metric: str) -> tuple[Any, Any]:
    """A statistic of a metrics block and its interval, by name (None, None without the block)."""
    if m is None:
        return None, None
    return getattr(m, metric, None), getattr(m, f"{metric}_ci", None)


def write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    """A CSV file of a figure's data (numbers as written in metrics.json; infinity as `inf`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path
