"""`view --export DIR`: the same page as static files, readable from disk with no server.

A browser does not let a page opened from `file://` fetch other files, so the data goes into
script files the page loads on demand: `data/run.js` and `data/rows.js` (the header and the
table), and `data/x/SS.js` / `data/t/SS.js` holding the timelines and fork trees of the records
whose id falls into shard SS (`shard_of`: FNV-1a of the id's UTF-8 bytes, 256 shards, the same
function as in viewer.js), so opening one execution of a 10,000-execution export reads one
shard, not the run. Links such as `index.html#/execution/ID` or `index.html#/?outcome=wrong_answer`
open one view, so a report can point into the export.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.evaluation.viewer.index import RunIndex
from branchpoint.evaluation.viewer.page import STATIC, STATIC_FILES, page_html
from branchpoint.evaluation.viewer.state import ViewerState
from branchpoint.evaluation.viewer.views import execution_view, json_safe, tree_view

SHARDS = 256


def shard_of(execution_id: str) -> str:
    """Two hex digits: 32-bit FNV-1a of the id's UTF-8 bytes, modulo 256."""
    h = 0x811C9DC5
    for byte in execution_id.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h % SHARDS:02x}"


def _script(key: str, data: Any) -> str:
    """A data file: one call that hands the JSON to the page (`</` escaped for script safety)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str).replace("</", "<\\/")
    return f"window.__bp_data({json.dumps(key)},{text});\n"


def export_run(state: ViewerState, out: Path) -> dict[str, int]:
    """Write the page and every view of the run (index built in full) into `out`; returns counts."""
    index: RunIndex = state.index
    if len(state.runs) > 1:
        raise InputError(
            "--export writes one run: give one run directory (several are shown together by the server only)"
        )
    out = Path(out)
    if out.resolve() == index.run_dir.resolve():
        raise InputError(f"--export {out}: choose a folder other than the run directory")
    if out.exists() and not out.is_dir():
        raise InputError(f"--export {out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").is_file():
        raise InputError(f"--export {out}: a non-empty folder that is not a viewer export; choose an empty one")
    if not index.progress.done:
        index.build()
    for sub in ("data", "static"):
        if (out / sub).is_dir():
            shutil.rmtree(out / sub)
    (out / "data" / "x").mkdir(parents=True)
    (out / "data" / "t").mkdir(parents=True)
    (out / "static").mkdir()
    for name in STATIC_FILES:
        shutil.copyfile(STATIC / name, out / "static" / name)
    (out / "index.html").write_text(page_html("static", "data/"), encoding="utf-8")
    (out / "data" / "run.js").write_text(_script("run", json_safe(state.summary(0))), encoding="utf-8")
    (out / "data" / "rows.js").write_text(_script("rows", json_safe(index.rows(0))), encoding="utf-8")
    forecasts = state.forecasts()[0]
    shards: dict[str, list[str]] = {}
    for execution_id in index.order:
        shards.setdefault(shard_of(execution_id), []).append(execution_id)
    counts = {"executions": 0, "trees": 0}
    for shard, ids in sorted(shards.items()):  # one shard in memory at a time
        views = {i: json_safe(execution_view(index, i)) for i in ids}
        trees = {i: json_safe(tree_view(index, i, forecasts)) for i in ids if index.kids.get(i)}
        for folder, data in (("x", views), ("t", trees)):
            if data:
                (out / "data" / folder / f"{shard}.js").write_text(_script(f"{folder}/{shard}", data), encoding="utf-8")
        counts["executions"] += len(views)
        counts["trees"] += len(trees)
    return {"rows": len(index.order), **counts, "errors": len(index.errors)}
