"""Every output file says where it came from: trace records name their invocation (one
provenance line each in invocations.jsonl), metrics.json, agreement.json, value.json and
report.md carry a provenance block, `runs show` prints them, and files written before
provenance was recorded still read."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.metrics_file import read_metrics
from branchpoint.evaluation.report import write_report
from branchpoint.evaluation.value.value_file import read_value
from branchpoint.provenance import read_invocations
from branchpoint.registry import REGISTRY
from branchpoint.traces import read_records

runner = CliRunner()

SPEC = {
    "name": "prov",
    "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
    "model": {"provider": "scripted", "script": ['search", "text": "x"}', 'answer", "text": "Canberra"}']},
    "agent": {"policy": "constrained", "search_cap": 1},
    "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
}


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A run, a fork study, a replay, evaluate --agreement, value and report of one run folder."""
    tmp = tmp_path_factory.mktemp("prov")
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    out = tmp / "run"
    invoke("run", str(spec), "--out", str(out), "--no-progress")
    invoke("run", str(spec), "--out", str(out), "--no-progress")  # finished: writes nothing, records nothing
    invoke("fork", str(out), "--actions", "THINK,SEARCH", "--repeats", "2", "--search-budget", "1", "--no-progress")
    first = read_records(out / "executions.jsonl")[0].execution_id
    invoke("replay", str(out), "--execution", first[:10], "--repeats", "1", "--no-progress")
    invoke("evaluate", str(out), "--agreement", "--bootstrap", "0", "--no-progress")
    invoke("value", str(out), "--resamples", "0", "--no-progress")
    invoke("report", str(out))
    return out


def test_each_trace_record_names_the_invocation_that_wrote_it(study: Path) -> None:
    invocations = read_invocations(study)
    assert [(i.file, i.provenance.command) for i in invocations] == [
        ("executions.jsonl", "branchpoint run"),
        ("forks.jsonl", "branchpoint fork"),
        ("replays.jsonl", "branchpoint replay"),
    ]
    for inv in invocations:
        records = read_records(study / inv.file)
        assert records and {r.invocation for r in records} == {inv.invocation_id}, inv.file
        p = inv.provenance
        assert p.argv[1] == p.command.split()[1]  # the command line as typed
        assert [(s.provider, s.kind) for s in p.model_servers] == [("scripted", "scripted")]
        used = {(c.kind, c.name): c for c in p.components}
        assert used[("policy", "constrained")].module == "branchpoint.agents.policies"
        assert used[("provider", "scripted")].package == "branchpoint"
        assert p.packages["langgraph"] == importlib.metadata.version("langgraph")


def test_every_json_output_and_the_report_carry_provenance(study: Path) -> None:
    for name, command in (
        ("metrics.json", "branchpoint evaluate"),
        ("agreement.json", "branchpoint evaluate"),
        ("value.json", "branchpoint value"),
    ):
        block = json.loads((study / name).read_text())["provenance"]
        assert block["command"] == command and block["branchpoint_version"], name
        assert block["packages"]["numpy"] == importlib.metadata.version("numpy")
    judges = [c.name for c in read_metrics(study).provenance.components if c.kind == "judge"]
    assert judges == ["rule"]
    assert read_value(study).provenance is not None
    value = read_value(study)
    scored = {name for name, f in value.forecasters.items() if f.kind == "registered"}
    assert scored and scored <= {c.name for c in value.provenance.components if c.kind == "forecaster"}
    report = (study / "report.md").read_text()
    section = report[report.index("## Provenance") :]
    for label in ("report.md", "metrics.json", "value.json", "executions.jsonl inv-", "forks.jsonl inv-"):
        assert f"- **{label}" in section, label
    assert "`branchpoint report " in section and "`branchpoint run " in section


def test_runs_show_prints_every_block(study: Path) -> None:
    text = invoke("runs", "show", str(study))
    for inv in read_invocations(study):
        assert f"{inv.invocation_id} → {inv.file}" in text
    assert "metrics.json: branchpoint evaluate" in text and "value.json: branchpoint value" in text
    assert f"langgraph {importlib.metadata.version('langgraph')}" in text
    assert "policy constrained: branchpoint.agents.policies (branchpoint" in text
    shown = json.loads(invoke("runs", "show", str(study), "--json"))
    assert shown["spec"]["name"] == "prov" and shown["spec"]["policy"] == "constrained"
    assert [i["file"] for i in shown["invocations"]] == ["executions.jsonl", "forks.jsonl", "replays.jsonl"]
    assert shown["traces"]["executions.jsonl"]["records"] == 4
    assert shown["outputs"]["metrics.json"]["command"] == "branchpoint evaluate"


def test_a_plugin_component_names_its_module_package_and_version(study: Path, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "prov_judge_plugin.py").write_text(
        "from branchpoint.evaluation.judges import judge\n"
        "from branchpoint.traces import Judgment\n\n"
        "@judge('prov-yes')\n"
        "def yes(record):\n"
        "    kind = 'answer' if record.answerable else 'abstention'\n"
        "    return [Judgment(judge='prov-yes', kind=kind, label='CORRECT' if record.answerable else 'ABSTAINED')]\n",
        encoding="utf-8",
    )
    info = tmp_path / "prov_judge_plugin-0.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: prov-judge-plugin\nVersion: 0.2\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[branchpoint.plugins]\nprov = prov_judge_plugin\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    monkeypatch.setattr(REGISTRY, "_plugins_loaded", False)
    monkeypatch.delitem(sys.modules, "prov_judge_plugin", raising=False)
    invoke("evaluate", str(study), "--judge", "prov-yes", "--bootstrap", "0", "--out", str(tmp_path / "m"))
    block = read_metrics(tmp_path / "m").provenance
    judge = next(c for c in block.components if (c.kind, c.name) == ("judge", "prov-yes"))
    assert (judge.module, judge.package, judge.version) == ("prov_judge_plugin", "prov-judge-plugin", "0.2")


def test_files_written_before_provenance_still_read(study: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for name in ("metrics.json", "value.json"):
        data = json.loads((study / name).read_text())
        del data["provenance"]
        (old / name).write_text(json.dumps(data), encoding="utf-8")
    lines = [json.loads(line) for line in (study / "executions.jsonl").read_text().splitlines()]
    (old / "executions.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "invocation"}) + "\n" for r in lines), encoding="utf-8"
    )
    if (study / "passages.jsonl").is_file():
        (old / "passages.jsonl").write_text((study / "passages.jsonl").read_text(), encoding="utf-8")
    assert read_metrics(old).provenance is None and read_value(old).provenance is None
    assert all(r.invocation is None for r in read_records(old / "executions.jsonl"))
    report, _ = write_report(old)
    section = report.read_text()[report.read_text().index("## Provenance") :]
    assert "- **report.md**" in section and "metrics.json" not in section
    text = invoke("runs", "show", str(old))
    assert "metrics.json: no provenance" in text and "none named: 4" in text


def test_a_malformed_block_is_one_error_naming_the_file_and_field(study: Path, tmp_path: Path) -> None:
    data = json.loads((study / "metrics.json").read_text())
    data["provenance"]["packages"] = ["numpy"]
    (tmp_path / "metrics.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match='field "provenance.packages"'):
        read_metrics(tmp_path)


def test_a_sharded_run_records_one_invocation_that_its_shards_records_name(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    data = {**SPEC, "agent": {"policy": "constrained", "search": False}, "sweep": {"agent.evidence_words": [40, 60]}}
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = tmp_path / "run"
    invoke("run", str(spec), "--out", str(out), "--processes", "2", "--concurrency", "2", "--no-progress")
    (invocation,) = read_invocations(out)
    assert invocation.provenance.command == "branchpoint run" and "--processes" in invocation.provenance.argv
    records = read_records(out / "executions.jsonl")
    assert len(records) == 8 and {r.invocation for r in records} == {invocation.invocation_id}
    assert not (out / "shards").exists()
