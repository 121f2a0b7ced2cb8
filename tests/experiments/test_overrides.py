"""Size and overrides from the command line: --set (dotted paths, YAML values, sweep axes),
--sample A,U, a --limit that keeps the balance, did-you-mean for unknown keys, examples in help."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments.planning import limit_balanced, select_questions
from branchpoint.experiments.spec import apply_overrides, expand_conditions, load_spec
from branchpoint.traces import read_records

runner = CliRunner()


def test_set_applies_dotted_paths_yaml_values_and_sweep_axes(write_spec):
    spec = load_spec(
        write_spec(),
        [
            "agent.top_k=1",
            "model={max_tokens: 16}",
            "questions.sample.answerable=2",
            "sweep.agent.search_cap=[0, 2]",
            "evaluation.lam=0.5",
        ],
    )
    assert spec.agent.top_k == 1 and spec.model.max_tokens == 16 and spec.model.provider == "scripted"
    assert spec.questions.sample.answerable == 2 and spec.evaluation.lam == 0.5
    assert spec.sweep == {"agent.search": [True, False], "agent.search_cap": [0, 2]}
    assert len(expand_conditions(spec)) == 4
    assert load_spec(write_spec(), ["sweep.agent.search=null"]).sweep == {}


def test_set_refuses_a_swept_setting_and_bad_syntax(write_spec):
    with pytest.raises(InputError, match=r"agent.search is a sweep axis .* --set sweep.agent.search=\[false\]"):
        load_spec(write_spec(), ["agent.search=false"])
    with pytest.raises(InputError, match="expected KEY=VALUE"):
        load_spec(write_spec(), ["agent.top_k"])
    with pytest.raises(InputError, match="a sweep axis takes a non-empty list"):
        load_spec(write_spec(), ["sweep.agent.top_k=3"])
    with pytest.raises(InputError, match="agent.top_k is a setting, not a section"):
        apply_overrides({"agent": {"top_k": 3}}, ["agent.top_k.x=1"])


def test_unknown_keys_get_a_did_you_mean(write_spec):
    with pytest.raises(
        InputError, match=r'field "agent.serach_cap": Extra inputs are not permitted \(did you mean "search_cap"\?\)'
    ):
        load_spec(write_spec({"agent": {"serach_cap": 3}}))
    with pytest.raises(InputError, match=r'"retrieval.sources.demo.chunk_word".*did you mean "chunk_words"'):
        load_spec(write_spec(), ["retrieval.sources.demo.chunk_word=40"])
    with pytest.raises(InputError, match=r'"questions.sample.unanswerabel".*did you mean "unanswerable"'):
        load_spec(write_spec(), ["questions.sample.unanswerabel=2"])
    with pytest.raises(InputError, match=r"no such setting 'search_cpa' \(did you mean \"search_cap\"\?\)"):
        load_spec(write_spec({"sweep": {"agent.search_cpa": [1]}}))


def test_sample_unanswerable_defaults_to_zero(write_spec):
    spec = load_spec(write_spec({"questions": {"path": "demo", "sample": {"answerable": 3}}}))
    assert spec.questions.sample.unanswerable == 0
    assert all(q.answerable for q in select_questions(spec))


def test_limit_keeps_the_answerable_unanswerable_balance(write_spec):
    spec = load_spec(
        write_spec({"questions": {"path": "demo", "sample": {"answerable": 6, "unanswerable": 6}}}),
        ["questions.limit=4"],
    )
    chosen = select_questions(spec)
    assert len(chosen) == 4 and sum(q.answerable for q in chosen) == 2
    assert len({q.category for q in chosen if not q.answerable}) == 2  # two categories, not one twice
    spec = load_spec(write_spec({"questions": {"path": "demo"}}), ["questions.limit=6"])
    chosen = select_questions(spec)
    assert 0 < sum(q.answerable for q in chosen) < 6
    assert limit_balanced(chosen, 10) == chosen


def test_run_with_set_and_sample_stores_the_resolved_spec(tmp_path, write_spec, isolated_cache):
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "run",
            str(write_spec()),
            "--out",
            str(out),
            "--no-progress",
            "--sample",
            "2,1",
            "--set",
            "agent.search_cap=1",
            "--set",
            "sweep.agent.search=[true]",
        ],
    )
    assert result.exit_code == 0, result.output
    stored = yaml.safe_load((out / "spec.yaml").read_text())
    assert stored["questions"]["sample"] == {"answerable": 2, "unanswerable": 1}
    assert stored["agent"]["search_cap"] == 1 and stored["sweep"] == {"agent.search": [True]}
    records = read_records(out / "executions.jsonl")
    assert len(records) == 3 and sum(r.answerable for r in records) == 2
    result = runner.invoke(app, ["run", str(write_spec()), "--sample", "2"])
    assert result.exit_code == 2 and "expected A,U" in result.output


def test_quickstart_and_fork_take_set_and_sample(tmp_path, write_spec, isolated_cache):
    out = tmp_path / "quick"
    result = runner.invoke(
        app,
        [
            "quickstart",
            "--spec",
            str(write_spec()),
            "--out",
            str(out),
            "--no-progress",
            "--sample",
            "1,1",
            "--set",
            "sweep.agent.search=[true]",
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(read_records(out / "executions.jsonl")) == 2
    result = runner.invoke(
        app,
        [
            "fork",
            str(out),
            "--sample",
            "1,0",
            "--actions",
            "THINK",
            "--repeats",
            "1",
            "--no-progress",
            "--set",
            "boundaries=[initial]",
        ],
    )
    assert result.exit_code == 0, result.output
    forks = read_records(out / "forks.jsonl")
    assert forks and {f.answerable for f in forks} == {True} and {f.parent.boundary for f in forks} == {"initial"}
    result = runner.invoke(app, ["fork", str(out), "--set", "repeat=2"])
    assert result.exit_code == 2 and 'did you mean "repeats"' in result.output


def test_every_help_shows_an_example():
    groups = [[]] + [[g.name] for g in app.registered_groups]
    groups += [[g.name, sub.name] for g in app.registered_groups for sub in g.typer_instance.registered_groups]
    for path in groups:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0 and "Example: branchpoint" in result.output, path
    for command in app.registered_commands:
        name = command.name or command.callback.__name__
        result = runner.invoke(app, [name, "--help"])
        assert "Example: branchpoint" in result.output, name
