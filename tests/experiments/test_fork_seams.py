"""The seams between `fork` and the commands that read its branches (issue 26): fork settings
are fingerprinted and never pooled silently, a record's sampling is the sampling as sent, and the
fork command's selection, refusal and rerun defects."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.evaluate import evaluate
from branchpoint.evaluation.fork_settings import ForkSettingsChoice, fingerprint_of
from branchpoint.evaluation.value import ValueConfig, value_study
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.states import saved_states
from branchpoint.models.request_log import read_requests
from branchpoint.traces import EXECUTIONS_FILE, FORKS_FILE, MINIMAL_SEARCH_FILE, read_records
from tests.experiments.conftest import CountingOpener
from tests.experiments.test_fork_repeats import SPEC as REPEATS_SPEC
from tests.experiments.test_fork_repeats import seeded_responder

#: test_fork_repeats' scripted study, on three questions (a search, then "Canberra"; forks draw by seed)
SPEC = {**REPEATS_SPEC, "name": "seams", "questions": {**REPEATS_SPEC["questions"], "limit": 3}}
drawn_responder = seeded_responder


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory) -> Path:
    """One scripted run for the module; each test forks a copy of it."""
    root = tmp_path_factory.mktemp("seams")
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRANCHPOINT_CACHE", str(tmp_path_factory.mktemp("cache")))
        run_experiment(load_spec(spec), root / "run", progress=False)
    return root / "run"


@pytest.fixture()
def run_dir(recorded_run: Path, tmp_path: Path, isolated_cache) -> Path:
    out = tmp_path / "run"
    shutil.copytree(recorded_run, out)
    return out


def fork(run_dir: Path, **plan) -> object:
    plan.setdefault("repeats", 2)
    return fork_run(run_dir, ForkPlan(**plan), progress=False, model_opener=CountingOpener(responder=drawn_responder))


# --------------------------------------------------------------------------------------------
# 1. Fork-settings fingerprint: value, evaluate and the viewer never pool two settings silently
# --------------------------------------------------------------------------------------------


def test_value_refuses_branches_of_two_search_budgets_and_names_them(run_dir: Path) -> None:
    fork(run_dir, search_budget=1)
    fork(run_dir, search_budget=3)  # THINK branches are shared; SEARCH ones are new
    config = ValueConfig(resamples=0, dev_split=0.0)
    with pytest.raises(InputError) as err:
        value_study(run_dir, config=config, write=False)
    message = str(err.value)
    assert "holds branches of two fork settings: search_budget=1 (fingerprint " in message
    assert "vs search_budget=3 (fingerprint " in message and "--mix-fork-settings" in message
    assert not (run_dir / "value.json").exists()
    budgets = {}
    for r in fork_records(run_dir):
        if r.branch == "SEARCH":
            budgets[r.fork_settings["search_budget"]] = r.fork_fingerprint
    one = value_study(
        run_dir, config=config.model_copy(update={"fork_settings": budgets[1][:6]}), write=False
    )  # a unique start of the fingerprint
    assert one["states"]["mean_repeats"] == {"think": 2.0, "search": 2.0}
    assert one["fork_settings"]["chosen"] == budgets[1][:6] and budgets[3] not in one["fork_settings"]["fingerprints"]
    assert one["fork_settings"]["left_out"] > 0
    mixed = value_study(run_dir, config=config.model_copy(update={"mix_fork_settings": True}), write=True)
    assert mixed["states"]["mean_repeats"] == {"think": 2.0, "search": 4.0}
    written = json.loads((run_dir / "value.json").read_text())
    assert written["settings"]["mix_fork_settings"] is True and written["fork_settings"]["mixed"] is True


def test_value_cli_refuses_the_mix_with_one_line_and_records_the_flag(run_dir: Path) -> None:
    fork(run_dir, search_budget=1)
    fork(run_dir, search_budget=2)
    runner = CliRunner()
    refused = runner.invoke(app, ["value", str(run_dir), "--resamples", "0", "--dev-split", "0", "--no-progress"])
    assert refused.exit_code == 2 and "search_budget=1" in refused.output and "search_budget=2" in refused.output
    ok = runner.invoke(
        app, ["value", str(run_dir), "--resamples", "0", "--dev-split", "0", "--no-progress", "--mix-fork-settings"]
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads((run_dir / "value.json").read_text())["settings"]["mix_fork_settings"] is True


def test_the_viewer_shows_two_budgets_apart_and_follows_values_choice(run_dir: Path) -> None:
    from branchpoint.evaluation.viewer.index import RunIndex
    from branchpoint.evaluation.viewer.views import tree_view

    fork(run_dir, search_budget=1, boundaries=["initial"])
    fork(run_dir, search_budget=3, boundaries=["initial"])
    parent = fork_records(run_dir)[0].parent.execution_id
    state = tree_view(RunIndex.open(run_dir).build(), parent, {})["states"][0]
    assert set(state["actions"]) == {"THINK", "SEARCH [search_budget=1]", "SEARCH [search_budget=3]"}
    assert state["delta"] is None and not state["scored"] and "no Δ" in state["fork_note"]
    assert all(a["n"] == 2 for a in state["actions"].values())  # never 4 SEARCH repeats of two settings
    three = next(r.fork_fingerprint for r in fork_records(run_dir) if r.fork_settings.get("search_budget") == 3)
    value_study(run_dir, config=ValueConfig(resamples=0, dev_split=0.0, fork_settings=three))
    state = tree_view(RunIndex.open(run_dir).build(), parent, {})["states"][0]
    assert set(state["actions"]) == {"THINK", "SEARCH", "SEARCH [search_budget=1]"}
    assert state["delta"] is not None and state["scored"] and three in state["fork_note"]


def test_two_seeds_of_the_same_settings_pool_and_a_rerun_says_nothing_was_drawn(run_dir: Path) -> None:
    first = fork(run_dir, seed=0)
    again = fork(run_dir, seed=0)
    assert again.ran == 0 and again.skipped_done == first.planned
    result = CliRunner().invoke(app, ["fork", str(run_dir), "--repeats", "2", "--no-progress"])
    assert result.exit_code == 0 and "nothing drawn" in result.output and "--seed 0" in result.output
    other = fork(run_dir, seed=1)  # another seed base: new draws, where it used to draw nothing
    assert other.ran == other.planned == first.planned
    branches = fork_records(run_dir)
    assert len({r.sampling["seed"] for r in branches}) == len(branches)
    assert len({r.fork_fingerprint for r in branches if r.branch == "SEARCH"}) == 1  # one setting
    pooled = value_study(run_dir, config=ValueConfig(resamples=0, dev_split=0.0), write=False)
    assert pooled["states"]["mean_repeats"] == {"think": 4.0, "search": 4.0}
    assert not pooled["fork_settings"]["mixed"]


def test_old_records_without_a_fingerprint_derive_it_and_still_refuse_a_mix(run_dir: Path) -> None:
    fork(run_dir, search_budget=1)
    fork(run_dir, search_budget=3)
    path = run_dir / FORKS_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    fingerprints = {row["execution_id"]: row.pop("fork_fingerprint") for row in lines}
    for row in lines:
        row.pop("fork_settings")
    path.write_text("".join(json.dumps(row) + "\n" for row in lines))
    old = read_records(path)
    assert all(r.fork_fingerprint is None for r in old)
    assert all(fingerprint_of(r) == fingerprints[r.execution_id] for r in old)  # derived = written
    with pytest.raises(InputError, match="search_budget=1 .* vs search_budget=3"):
        value_study(run_dir, config=ValueConfig(resamples=0, dev_split=0.0), write=False)


def test_evaluate_refuses_two_fork_settings_within_one_condition(run_dir: Path) -> None:
    fork(run_dir, actions=["THINK"], boundaries=["initial"])
    path = run_dir / FORKS_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # a branch drawn at another temperature than its condition says (what extra_body used to do)
    lines[0]["sampling"]["temperature"] = 0.0
    lines[0].pop("fork_settings"), lines[0].pop("fork_fingerprint")
    path.write_text("".join(json.dumps(row) + "\n" for row in lines))
    with pytest.raises(InputError, match=r"in one condition .*temperature=0 \(fingerprint .* vs temperature=0.6"):
        evaluate(path, out_dir=run_dir / "m")
    metrics = evaluate(path, out_dir=run_dir / "m", fork_choice=ForkSettingsChoice(mix=True))
    assert metrics["fork_settings"]["mixed"] is True
    assert json.loads((run_dir / "m" / "metrics.json").read_text())["fork_settings"]["mix_allowed"] is True


def test_evaluate_forks_beside_minimal_search_does_not_crash(run_dir: Path) -> None:
    """docs/forking.md's `branchpoint evaluate runs/X/forks.jsonl` with minimal_search.jsonl there."""
    fork(run_dir, minimal_search=True, judge="rule")
    assert (run_dir / MINIMAL_SEARCH_FILE).read_text().strip()
    result = CliRunner().invoke(
        app, ["evaluate", str(run_dir / FORKS_FILE), "--out", str(run_dir / "fm"), "--bootstrap", "0"]
    )
    assert result.exit_code == 0, result.output
    over = json.loads((run_dir / "fm" / "metrics.json").read_text())["over_search"]
    assert over["available"] is False and "describes other executions" in over["reason"]
    run = evaluate(run_dir, out_dir=run_dir / "rm")  # the run's own executions: over-search reported
    assert run["over_search"]["available"] is True


# --------------------------------------------------------------------------------------------
# 2. Sampling as sent
# --------------------------------------------------------------------------------------------


def test_records_hold_the_sampling_their_requests_sent(run_dir: Path, tmp_path: Path) -> None:
    fork_run(
        run_dir,
        ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=2),
        progress=False,
        log_requests=True,
        model_opener=CountingOpener(responder=drawn_responder),
    )
    sent = {}
    for entry in read_requests(run_dir / "requests.jsonl"):
        sent[entry["execution_id"]] = {k: v for k, v in entry["body"].items() if k in ("temperature", "top_p", "seed")}
    branches = fork_records(run_dir)
    assert branches and all(r.sampling == sent[r.execution_id] for r in branches)
    assert all(r.fork_settings == {"depth": 1, "temperature": 0.6, "top_p": 0.95} for r in branches)
    # a run records what it sent too (the scripted model is sent the seed only)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "questions": {**SPEC["questions"], "limit": 1}}))
    run_experiment(load_spec(spec), tmp_path / "run2", progress=False, log_requests=True)
    executions = read_records(tmp_path / "run2" / EXECUTIONS_FILE)
    logged = read_requests(tmp_path / "run2" / "requests.jsonl")
    assert executions[0].sampling == {"seed": 0} == {k: v for k, v in logged[-1]["body"].items() if k == "seed"}


def test_a_sim_run_and_its_forks_record_the_sampling_their_bodies_sent(tmp_path: Path, isolated_cache) -> None:
    spec = tmp_path / "sim.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "simsent",
                "questions": {"path": "demo", "sample": {"answerable": 1, "unanswerable": 1}},
                "model": {
                    "provider": "sim",
                    "name": "branchpoint-sim-instruct",
                    "style": "chat",
                    "temperature": 0.7,
                    "seed": 4,
                    "max_tokens": 256,
                    "extra_body": {"top_k": 20},
                    "sim": {"latency_scale": 0.0},
                },
                "agent": {"policy": "native", "search_cap": 1},
                "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
            }
        )
    )
    out = tmp_path / "run"
    run_experiment(load_spec(spec), out, progress=False, log_requests=True)
    fork_run(out, ForkPlan(actions=["THINK"], boundaries=["initial"], repeats=2), progress=False, log_requests=True)
    last = {}
    for entry in read_requests(out / "requests.jsonl"):
        last[entry["execution_id"]] = entry["body"]
    records = read_records(out / EXECUTIONS_FILE) + fork_records(out)
    assert len(records) == 2 + 4
    for rec in records:
        body = last[rec.execution_id]
        assert rec.sampling == {k: body[k] for k in ("temperature", "top_p", "seed", "top_k") if k in body}
        assert rec.sampling["top_k"] == 20
    assert {r.sampling["temperature"] for r in records if r.parent is None} == {0.7}
    assert {r.sampling["temperature"] for r in records if r.parent is not None} == {0.6}
    assert {r.fork_settings["top_k"] for r in fork_records(out)} == {20.0}


def test_extra_body_sampling_is_refused_before_any_work(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "model": {**SPEC["model"], "extra_body": {"temperature": 0.0}}}))
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2
    assert 'field "model.extra_body": sets temperature' in result.output and "model.temperature" in result.output
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------------------------
# 3. Fork command defects
# --------------------------------------------------------------------------------------------


def test_fork_by_checkpoint_id_works_once_a_stop_branch_is_recorded(run_dir: Path) -> None:
    fork(run_dir, actions=["STOP"], boundaries=["pending_query"])
    assert any(r.branch == "STOP" for r in fork_records(run_dir))
    state = next(s for s in saved_states(run_dir) if s.boundary.boundary == "initial")
    summary = fork(run_dir, checkpoints=[state.boundary.checkpoint_id], actions=["THINK"])
    assert summary.ran == summary.planned == 2
    shown_end = state.boundary.checkpoint_id[-12:]  # what `checkpoints ls` shows
    assert fork(run_dir, checkpoints=[shown_end], actions=["THINK"], repeats=3).ran == 1


def test_a_checkpoint_prefix_that_matches_several_states_is_refused_listing_them(run_dir: Path) -> None:
    ids = [s.boundary.checkpoint_id for s in saved_states(run_dir)]
    shared = ids[0][:4]
    assert sum(i.startswith(shared) for i in ids) > 1
    with pytest.raises(InputError) as err:
        fork(run_dir, checkpoints=[shared], actions=["THINK"])
    assert f"--checkpoint {shared}: " in str(err.value) and "saved states match" in str(err.value)
    assert ids[0] in str(err.value) and not (run_dir / FORKS_FILE).exists()


def test_a_spec_fork_section_at_temperature_zero_is_refused_before_the_run(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "fork": {"repeats": 3, "temperature": 0}}))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "fork.repeats 3 at fork.temperature 0" in result.output and "fork.allow_identical_repeats" in result.output
    assert not out.exists()  # nothing written, no execution run
