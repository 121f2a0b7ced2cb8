"""Third-party plug-ins: a package with an entry point in the group `branchpoint.plugins` adds a
policy, a judge and a source kind that a spec then uses. The package is installed for the test
only: its module and a `.dist-info` (METADATA, entry_points.txt) in a tmp folder on `sys.path`,
removed afterwards, so the shared environment is unchanged."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from branchpoint.evaluation import MetricsConfig, evaluate
from branchpoint.experiments import load_spec, run_experiment
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.traces import read_records

PLUGIN = textwrap.dedent('''
    """A tiny branchpoint plug-in: a policy, a judge and a source kind."""
    from typing import Literal

    from branchpoint.agents import Decision, apply_decision, policy
    from branchpoint.evaluation.judges import judge
    from branchpoint.retrieval.sources import SourceSpec, source
    from branchpoint.traces import Judgment, RetrievedDoc


    @policy("demo-search-once")
    def search_once(state, runtime):
        ctx = runtime.context
        if state["searches"] == 0 and ctx.offers_search:
            return apply_decision(state, Decision("search", state["question"]), ctx)
        title = state["evidence"][0]["title"] if state.get("evidence") else "I don't know"
        return apply_decision(state, Decision("answer", title), ctx)


    @judge("demo-title")
    def title_judge(record):
        if record.answerable:
            label = "CORRECT" if record.final_answer in record.gold_answers else "INCORRECT"
            return [Judgment(judge="demo-title", kind="answer", label=label)]
        return [Judgment(judge="demo-title", kind="abstention", label="ANSWERED")]


    class OneTitle:
        def __init__(self, name, title):
            self.name, self.title = name, title

        def search(self, query, k):
            return [RetrievedDoc(doc_id="t", score=1.0, title=self.title, text=self.title, source=self.name)]


    @source("demo-one-title")
    class OneTitleSource(SourceSpec):
        kind: Literal["demo-one-title"] = "demo-one-title"
        title: str

        def open(self, name, *, progress=False):
            return OneTitle(name, self.title)
''')


def install(folder: Path, module: str, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`module` and its distribution's metadata in `folder`, on sys.path for this test only; the
    registry re-reads the plug-ins and drops what they registered afterwards."""
    (folder / f"{module}.py").write_text(body, encoding="utf-8")
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[branchpoint.plugins]\n{module} = {module}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    monkeypatch.setattr(REGISTRY, "_plugins_loaded", False)
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_a_plugin_adds_a_policy_a_judge_and_a_source_a_spec_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, "bp_demo_plugin", PLUGIN, monkeypatch)
    try:
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(
            yaml.safe_dump(
                {
                    "name": "plugin",
                    "questions": {"sample": {"answerable": 2, "unanswerable": 1}},
                    "model": {
                        "provider": "scripted",
                        "script": ["unused"],
                        "max_tokens": 16,
                    },
                    "agent": {"policy": "demo-search-once", "search_cap": 1},
                    "retrieval": {
                        "default": "one",
                        "sources": {"one": {"kind": "demo-one-title", "title": "Canberra"}},
                    },
                    "evaluation": {"judge": "demo-title"},
                }
            )
        )
        spec = load_spec(spec_path)
        assert {"demo-search-once", "demo-title", "demo-one-title"} <= {
            *REGISTRY.names("policy"),
            *REGISTRY.names("judge"),
            *REGISTRY.names("source"),
        }
        run_dir = tmp_path / "run"
        run_experiment(spec, run_dir, progress=False)
        records = read_records(run_dir / "executions.jsonl")
        assert len(records) == 3 and all(r.final_answer == "Canberra" and r.search_calls == 1 for r in records)
        assert {d.source for r in records for s in r.steps for d in s.retrieved} == {"one"}
        metrics = evaluate(
            run_dir,
            judge=spec.evaluation.open_judge(run_dir),
            cfg=MetricsConfig(bootstrap=0),
        )
        assert metrics["judge"] == "demo-title"
    finally:
        sys.modules.pop("bp_demo_plugin", None)


def test_a_plugin_that_fails_to_load_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        tmp_path,
        "bp_broken_plugin",
        "raise ImportError('needs frobnicate')\n",
        monkeypatch,
    )
    with pytest.raises(
        RegistryError,
        match=r'plug-in "bp_broken_plugin" \(bp_broken_plugin, distribution '
        r"bp_broken_plugin\) failed to load: needs frobnicate",
    ):
        REGISTRY.names("policy")
