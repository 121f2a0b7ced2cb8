"""`module:function` policies are imported from the spec's folder and the working directory."""

from __future__ import annotations

import sys

import pytest
import yaml

from branchpoint.agents import resolve_policy
from branchpoint.errors import InputError
from branchpoint.experiments import load_spec
from branchpoint.experiments.planning import policy_paths

MODULE = """
from branchpoint.agents import Decision, apply_decision


def always_unknown(state, runtime):
    return apply_decision(state, Decision("answer", "I don't know"), runtime.context)
"""


def test_policy_module_next_to_the_spec_is_found_from_any_working_directory(tmp_path, monkeypatch):
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "spec_folder_policies.py").write_text(MODULE)
    spec_path = folder / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({"name": "p", "agent": {"policy": "spec_folder_policies:always_unknown"}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sys.modules.pop("spec_folder_policies", None)
    with pytest.raises(InputError, match='cannot import module "spec_folder_policies"'):
        resolve_policy("spec_folder_policies:always_unknown")
    spec = load_spec(spec_path)
    assert spec.source_dir == folder.resolve()
    policy = resolve_policy(spec.agent.policy, policy_paths(spec))
    assert policy.node.__name__ == "always_unknown"
    assert str(folder.resolve()) not in sys.path  # the import path is restored
    sys.modules.pop("spec_folder_policies", None)
