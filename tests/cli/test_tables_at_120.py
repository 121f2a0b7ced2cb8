"""Tables stay readable at 120 columns: the evaluation table of a fork study shows every number,
`value` shows every forecaster and router name whole, `checkpoints ls` every id (whole with
--wide, the 12-character end that --checkpoint takes without)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.cli.common import console
from branchpoint.traces import write_records
from tests.evaluation.builders import make_record
from tests.evaluation.value.test_study import make_run

runner = CliRunner()
COLUMNS = {"COLUMNS": "120"}

#: Fork-study conditions as `evaluate forks.jsonl` labels them (long: every fork setting).
FORK_CONDITIONS = [
    {"fork.action": "SEARCH", "fork.search_budget": 1, "fork.temperature": 0.6, "fork.top_p": 0.95},
    {"fork.action": "STOP", "fork.temperature": 0.6, "fork.top_p": 0.95},
    {
        "fork.action": "SWITCH",
        "fork.search_budget": 1,
        "fork.switch_source": "demo_chunks",
        "fork.temperature": 0.6,
        "fork.top_p": 0.95,
    },
    {"fork.action": "THINK", "fork.temperature": 0.6, "fork.top_p": 0.95},
]


@pytest.fixture(autouse=True)
def width_120(monkeypatch):
    """The console as a 120-column terminal draws it (it is made once, at import)."""
    monkeypatch.setattr(console, "width", 120)


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), env=COLUMNS)
    assert result.exit_code == 0, result.output
    return result.output


def test_fork_evaluation_table_shows_every_number(tmp_path):
    records = []
    for k, condition in enumerate(FORK_CONDITIONS, start=1):
        for q in range(k):  # n = 1, 2, 3, 4
            records.append(
                make_record(
                    f"q{q}",
                    execution_id=f"e{k}-{q}",
                    condition=condition,
                    labels={"answer": "CORRECT"},
                    input_tokens=1111 * k,
                    output_tokens=37 * k,
                )
            )
    traces = tmp_path / "forks.jsonl"
    write_records(traces, records)
    out = invoke("evaluate", str(traces), "--judge", "given", "--no-progress")
    assert "…" not in out, out
    rows = [line for line in out.splitlines() if re.search(r"\d,\d{3}", line)]
    assert len(rows) == 4, out
    for k, row in enumerate(rows, start=1):  # conditions sort as listed: n, in tok, out tok whole
        cells = row.split()
        assert cells[-2:] == [f"{1111 * k:,}", str(37 * k)] and str(k) in cells, row


def test_value_shows_every_forecaster_and_router_name_whole(tmp_path):
    run = make_run(tmp_path, n_questions=8)
    files = []
    for suffix in ("a", "b"):  # two long names that differ only at the end
        path = tmp_path / f"my_recalibrated_public_prefix_forecaster_{suffix}.jsonl"
        path.write_text(
            "".join(
                json.dumps({"parent_execution_id": f"p{q}", "checkpoint_id": c, "q_think": 0.3, "q_search": 0.6}) + "\n"
                for q in range(8)
                for c in ("c0", "c1")
            )
        )
        files += ["--forecasts", str(path)]
    out = invoke("value", str(run), "--judge", "given", "--resamples", "20", "--no-progress", *files)
    saved = json.loads((run / "value.json").read_text())
    names = [*saved["brier"], *saved["utility"]["by_price"]["0"]]
    assert any(n.endswith("forecaster_a") for n in names) and any(n.endswith("forecaster_b") for n in names)
    lines = out.splitlines()
    for name in names:
        assert any(re.search(rf"│ {re.escape(name)} +│", line) for line in lines), f"{name} not shown whole\n{out}"


def test_checkpoints_ls_shows_full_ids_with_wide(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "ids",
                "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
                "model": {"provider": "scripted", "script": ['answer", "text": "I don\'t know"}']},
                "agent": {"policy": "constrained", "search": False},
                "sweep": {"agent.prompt": ["plain", "abstention"]},
            }
        )
    )
    out = tmp_path / "run"
    invoke("run", str(spec), "--out", str(out), "--no-progress")
    rows = [json.loads(line) for line in invoke("checkpoints", "ls", str(out), "--json").splitlines()]
    assert len(rows) == 8
    wide = invoke("checkpoints", "ls", str(out), "--wide")
    short = invoke("checkpoints", "ls", str(out))
    for row in rows:
        assert row["execution_id"] in wide and row["checkpoint_id"] in wide, wide
        assert row["checkpoint_id"][-12:] in short and row["execution_id"][:12] in short, short
