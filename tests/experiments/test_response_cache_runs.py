"""The response cache (`--cache DIR`) over whole runs and fork studies on the simulated model:
a rerun into a new folder and an extended fork study send no request they sent before, repeats
stay independent draws, and the traces are those of the first run but for the hit flags.

The simulated server is started once for the module and reached as `provider: openai`, so its
own request counter (`GET /v1/sim/stats`) counts what the runs sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.experiments.branch_planning import fork_records
from branchpoint.experiments.forking import ForkPlan, fork_run
from branchpoint.experiments.store import RunStore
from branchpoint.models.spec import SimServerSpec
from branchpoint.sim import SimServer
from branchpoint.traces import ExecutionRecord

NAME = "branchpoint-sim-instruct"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """One simulated server for the module (no latency); its stats count every model request."""
    with SimServer(SimServerSpec(latency_scale=0.0), NAME) as server:
        yield server.base_url


def sent(url: str) -> int:
    """Chat and completion requests the simulated server has answered so far."""
    stats = httpx.get(url.removesuffix("/v1") + "/v1/sim/stats", timeout=5).json()
    return sum(stats["requests"].values())


def write_spec(
    tmp_path: Path, url: str, *, style: str = "chat", seed: int | None = 3, cache: Path | None = None
) -> Path:
    model: dict[str, Any] = {
        "provider": "openai",
        "base_url": url,
        "name": NAME,
        "style": style,
        "max_tokens": 256,
        "temperature": 0.6,
        "seed": seed,
    }
    if cache is not None:
        model["response_cache"] = str(cache)
    data = {
        "name": "rcache",
        "questions": {"path": "demo", "sample": {"answerable": 2, "unanswerable": 2}},
        "model": model,
        "agent": {"policy": "native" if style == "chat" else "constrained", "search_cap": 2, "top_k": 2},
        "retrieval": {"default": "bm", "sources": {"bm": {"kind": "bm25"}}},
    }
    path = tmp_path / f"rcache-{style}-{seed}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def content(records: list[ExecutionRecord]) -> dict[str, dict[str, Any]]:
    """Records by id without timings, saved-state ids, the invocation and the hit flags."""
    out = {}
    for rec in records:
        data = rec.model_dump(mode="json", exclude={"wall_s", "checkpoint_ids", "invocation"})
        for step in data["steps"]:
            step.pop("latency_s", None)
            if step["kind"] != "search":
                step.pop("cache_hit", None)
        out[rec.execution_id] = data
    return out


def model_hits(records: list[ExecutionRecord]) -> list[bool | None]:
    return [s.cache_hit for r in records for s in r.steps if s.kind != "search"]


@pytest.mark.parametrize("style", ["chat", "completion"])
def test_a_rerun_into_a_new_folder_sends_no_request_and_records_the_same_traces(
    tmp_path, sim_url, isolated_cache, style
):
    cache = tmp_path / "responses"
    spec = load_spec(write_spec(tmp_path, sim_url, style=style, cache=cache))
    before = sent(sim_url)
    first = run_experiment(spec, tmp_path / "a", progress=False, concurrency=4)
    after_first = sent(sim_url)
    assert first.ran == 4 and after_first > before
    assert first.response_cache.get("misses", 0) == after_first - before  # each request sent once, looked up
    again = run_experiment(spec, tmp_path / "b", progress=False, concurrency=4)
    assert sent(sim_url) == after_first  # not one request
    assert again.ran == 4 and again.response_cache == {"hits": sum(first.response_cache.values())}
    a, b = RunStore(tmp_path / "a").records(), RunStore(tmp_path / "b").records()
    assert content(a) == content(b)
    assert model_hits(b) and all(model_hits(b))
    assert False in model_hits(a)
    # without the cache the same spec sends its requests again, and its steps say nothing of a cache
    plain = run_experiment(spec.with_response_cache(False), tmp_path / "c", progress=False, concurrency=4)
    assert plain.response_cache == {} and sent(sim_url) > after_first
    assert set(model_hits(RunStore(tmp_path / "c").records())) == {None}


def test_unseeded_sampling_is_sent_every_time_and_never_stored(tmp_path, sim_url, isolated_cache):
    """Temperature 0.6 without a seed: each execution is an independent draw, so the cache
    neither serves nor stores it (a second run sends as many requests as the first)."""
    cache = tmp_path / "responses"
    spec = load_spec(write_spec(tmp_path, sim_url, seed=None, cache=cache))
    start = sent(sim_url)
    first = run_experiment(spec, tmp_path / "a", progress=False)
    middle = sent(sim_url)
    second = run_experiment(spec, tmp_path / "b", progress=False)
    assert middle > start and sent(sim_url) - middle > 0
    assert first.response_cache == second.response_cache == {}
    assert set(model_hits(RunStore(tmp_path / "b").records())) == {None}


def test_repeats_are_sent_and_an_extended_fork_study_sends_only_the_new_draws(tmp_path, sim_url, isolated_cache):
    cache = tmp_path / "responses"
    spec_file = write_spec(tmp_path, sim_url)
    run_experiment(load_spec(spec_file), tmp_path / "run", progress=False, concurrency=4)
    plan = {"actions": ["THINK"], "boundaries": ["initial"], "repeats": 2, "concurrency": 4}
    start = sent(sim_url)
    two = fork_run(tmp_path / "run", ForkPlan(**plan), progress=False, response_cache=str(cache))
    after_two = sent(sim_url)
    branches = fork_records(tmp_path / "run")
    assert two.ran == len(branches) == 8 and len({b.sampling["seed"] for b in branches}) == 8
    # every repeat is its own request (distinct seeds: distinct keys), none answered by another's reply
    firsts = [b.steps[0] for b in branches]
    assert all(s.cache_hit is False for s in firsts)
    assert after_two - start == two.response_cache["misses"] >= 8
    three = fork_run(tmp_path / "run", ForkPlan(**{**plan, "repeats": 3}), progress=False, response_cache=str(cache))
    added = [b for b in fork_records(tmp_path / "run") if b.repeat == 2]
    assert three.ran == len(added) == 4 and all(b.steps[0].cache_hit is False for b in added)
    assert sent(sim_url) - after_two == three.response_cache["misses"]
    # the same study forked afresh from a copy of the run: every draw found in the cache
    fresh = tmp_path / "fresh"
    run_experiment(load_spec(spec_file), fresh, progress=False, concurrency=4)
    mark = sent(sim_url)
    redo = fork_run(fresh, ForkPlan(**{**plan, "repeats": 3}), progress=False, response_cache=str(cache))
    assert redo.ran == 12 and redo.response_cache.get("misses", 0) == 0 and sent(sim_url) - mark == 0


def test_the_cli_caches_a_run_over_processes_and_a_rerun_sends_nothing(tmp_path, sim_url, isolated_cache):
    """`run --cache DIR --processes 2`: two processes write one cache file; the rerun into a new
    folder, in one process, finds every reply, and the summary says so."""
    cache = tmp_path / "responses"
    spec_file = write_spec(tmp_path, sim_url)
    cli = CliRunner()
    out = cli.invoke(
        app,
        [
            "run",
            str(spec_file),
            "--out",
            str(tmp_path / "a"),
            "--cache",
            str(cache),
            "--processes",
            "2",
            "--no-progress",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "response cache: 0 of" in out.output
    assert yaml.safe_load((tmp_path / "a" / "spec.yaml").read_text())["model"]["response_cache"] == str(cache)
    mark = sent(sim_url)
    again = cli.invoke(
        app, ["run", str(spec_file), "--out", str(tmp_path / "b"), "--cache", str(cache), "--no-progress"]
    )
    assert again.exit_code == 0, again.output
    assert sent(sim_url) == mark
    hits = sum(1 for h in model_hits(RunStore(tmp_path / "b").records()) if h)
    assert f"response cache: {hits} of {hits} model calls answered from the cache, 0 sent" in again.output
    assert content(RunStore(tmp_path / "a").records()) == content(RunStore(tmp_path / "b").records())
