"""Spec loading and sweep expansion: clear errors naming file, field or line."""

from __future__ import annotations

import pytest

from branchpoint.errors import InputError
from branchpoint.experiments.spec import condition_fingerprint, expand_conditions, load_spec
from tests.conftest import REPO


def test_quickstart_spec_is_valid():
    spec = load_spec(REPO / "experiments" / "quickstart.yaml")
    conditions = expand_conditions(spec)
    assert [c for c, _ in conditions] == [{"agent.search": True}, {"agent.search": False}]
    assert [s.agent.search for _, s in conditions] == [True, False]


def test_sweep_is_a_cartesian_product(write_spec):
    spec = load_spec(write_spec({"sweep": {"agent.search_cap": [0, 1, 3], "agent.top_k": [1, 2]}}))
    conditions = expand_conditions(spec)
    assert len(conditions) == 6
    assert {(c["agent.search_cap"], c["agent.top_k"]) for c, _ in conditions} == {
        (a, b) for a in (0, 1, 3) for b in (1, 2)
    }
    fingerprints = {condition_fingerprint(s) for _, s in conditions}
    assert len(fingerprints) == 6


def test_invalid_field_type_names_the_field(write_spec):
    with pytest.raises(InputError, match=r'spec.yaml: field "agent.search_cap": Input should be a valid integer'):
        load_spec(write_spec({"agent": {"search_cap": "many"}}))


def test_unknown_key_is_refused(write_spec):
    with pytest.raises(InputError, match=r'field "agent.serach_cap": Extra inputs are not permitted'):
        load_spec(write_spec({"agent": {"serach_cap": 3}}))


@pytest.mark.parametrize(
    ("field", "model"),
    [
        ("extra_body", {"extra_body": {1: 2}}),
        ("options", {"provider": "langchain", "factory": "pkg.mod:make", "options": {1: 2}}),
    ],
)
def test_model_request_fields_and_factory_options_are_named_by_strings(write_spec, field, model):
    """extra_body fields go into a JSON body and options are keyword arguments: keys are strings."""
    with pytest.raises(
        InputError, match=rf'spec.yaml: field "model.{field}.1.\[key\]": Input should be a valid string'
    ):
        load_spec(write_spec({"model": {"provider": "scripted", "script": ["x"], **model}}))


def test_bad_sweep_axis(write_spec):
    with pytest.raises(InputError, match=r'field "sweep.agent.nope": no such setting'):
        load_spec(write_spec({"sweep": {"agent.nope": [1]}}))
    with pytest.raises(InputError, match=r"sweep value: field \"agent.search_cap\""):
        load_spec(write_spec({"sweep": {"agent.search_cap": [-1]}}))


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nagent: {policy: [\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.yaml line \d+: invalid YAML"):
        load_spec(path)


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(InputError, match="spec file not found"):
        load_spec(tmp_path / "none.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(InputError, match="expected a mapping"):
        load_spec(path)


def test_shipped_specs_are_valid():
    for path in sorted((REPO / "experiments").glob("*.yaml")):
        assert load_spec(path).name


def test_section_axis_overrides_several_settings_and_keeps_the_rest(write_spec):
    spec = load_spec(
        write_spec(
            {
                "model": {"provider": "scripted", "script": ["x"], "max_tokens": 32},
                "sweep": {"model": [{"name": "a", "max_tokens": 8}, {"name": "b"}]},
            }
        )
    )
    resolved = [s for _, s in expand_conditions(spec)]
    assert [(s.model.name, s.model.max_tokens, s.model.provider) for s in resolved] == [
        ("a", 8, "scripted"),
        ("b", 32, "scripted"),
    ]


def test_a_simulated_model_condition_does_not_depend_on_where_its_files_lie(write_spec, tmp_path):
    """Execution ids (and so the seeds of every draw) of a sim run are the same whichever folder
    its question file lies in and however fast the simulator answers: `validate --out A` and
    `--out B` draw the same studies; its profile and seed still count."""
    base = {"model": {"provider": "sim", "sim": {"questions": str(tmp_path / "a" / "q.jsonl")}}}
    spec = load_spec(write_spec(base))
    same = [
        {"model": {"provider": "sim", "sim": {"questions": str(tmp_path / "b" / "q.jsonl")}}},
        {"model": {"provider": "sim", "sim": {"latency_scale": 0, "port": 8123}}},
    ]
    for other in same:
        assert condition_fingerprint(load_spec(write_spec(other))) == condition_fingerprint(spec)
    for other in (
        {"model": {"provider": "sim", "sim": {"seed": 1}}},
        {"model": {"provider": "sim", "sim": {"profile": "over_searching"}}},
    ):
        assert condition_fingerprint(load_spec(write_spec(other))) != condition_fingerprint(spec)
