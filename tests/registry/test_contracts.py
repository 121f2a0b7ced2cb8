"""Each registry kind's contract (`registry_kinds`), checked when a component registers: a
component that does not fit, or metadata the kind does not declare, is refused with its name,
kind, origin and what is missing; a `package.module:attr` is checked when it resolves."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from branchpoint.registry import BUILTIN_MODULES, KINDS, REGISTRY, Registry, RegistryError
from branchpoint.registry_kinds import CONTRACTS


def fresh() -> Registry:
    """A registry with every kind and its contract, no built-ins and no plug-ins."""
    return Registry({kind: () for kind in KINDS}, plugin_group="branchpoint.test-no-such-group")


def node(state, runtime):
    return {}


def record_judge(record):
    return []


class Settings(BaseModel):
    threshold: float = 0.5


def test_every_kind_has_a_contract_and_every_builtin_fits_it():
    assert set(CONTRACTS) == set(BUILTIN_MODULES)
    for kind in KINDS:
        for entry in REGISTRY.entries(kind):
            assert CONTRACTS[kind].problem(entry.obj, entry.meta) is None, (kind, entry.name)


@pytest.mark.parametrize(
    ("kind", "obj", "meta", "message"),
    [
        ("policy", node, {"note": "x"}, r'unknown metadata field "note" \(a policy may carry: force_answer\)'),
        ("policy", len, {}, r"a builtin_function_or_method, not a Python function of \(state, runtime\)"),
        ("policy", lambda a, b, c: {}, {}, r"does not take \(state\) or \(state, runtime\) arguments"),
        ("judge", node, {}, r"does not take the arguments \(record\)"),
        ("judge", record_judge, {"settings": Settings}, r"does not take the arguments \(settings, run\)"),
        ("judge", record_judge, {"settings": dict}, r'metadata field "settings" has the wrong type'),
        ("source", Settings, {}, r"has no `kind` field"),
        ("encoder", lambda: None, {}, r"cannot be built as obj\(settings=EncoderSettings\)"),
        ("index", {"M": 16}, {}, r"a dict, not an IndexKind \(missing: name, defaults, search_params, new_index\)"),
        ("question_format", object(), {}, r"expected a QuestionFormat, got object"),
        ("provider", lambda spec: None, {}, r"does not take the arguments \(spec, log_dir\)"),
        ("reward", lambda records: None, {}, r"does not take the arguments \(records, judge\)"),
        ("forecaster", lambda states: None, {}, r"does not take the arguments \(states, dev\)"),
        ("forecaster", lambda s, d: None, {"fitted": "yes"}, r'metadata field "fitted" has the wrong type \(str\)'),
        ("calibrator", lambda raw, states: None, {}, r"does not take the arguments \(raw, states, dev, seed=\)"),
        ("router", lambda states, dev: None, {}, r"does not take the arguments \(states, dev, price\)"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None,
)
def test_a_component_that_does_not_fit_is_refused_naming_it(kind, obj, meta, message):
    with pytest.raises(RegistryError, match=message) as err:
        fresh().add(kind, "mine", obj, origin="my_pkg.mod:thing", **meta)
    assert str(err.value).startswith(f'{kind} "mine" (my_pkg.mod:thing): ')
    assert f"is {CONTRACTS[kind].what}" in str(err.value)  # what a component of the kind is


def test_a_module_attr_is_checked_when_it_resolves():
    r = fresh()
    assert r.get("policy", "tests.registry.test_contracts:node").obj is node
    with pytest.raises(RegistryError, match=r'judge "tests.registry.test_contracts:node" .*\(record\)'):
        r.get("judge", "tests.registry.test_contracts:node")


def test_typed_handles_name_their_kind():
    from branchpoint.agents.policies import POLICY
    from branchpoint.evaluation.value.routers import ROUTER
    from branchpoint.retrieval.index_kinds import INDEX, IndexKind

    assert REGISTRY.get(POLICY, "native").obj is REGISTRY.get("policy", "native").obj
    assert isinstance(REGISTRY.get(INDEX, "pq").obj, IndexKind)
    assert [e.name for e in REGISTRY.entries(ROUTER)] == REGISTRY.names("router")
