"""The registry's rules, the same for every kind: one duplicate rule, sorted names, errors that
list the known names, `package.module:attr` resolution, plug-ins by entry point."""

from __future__ import annotations

import importlib.metadata

import pytest

from branchpoint.registry import KINDS, REGISTRY, Registry, RegistryError, plugin


def small() -> Registry:
    """A registry of the test's own (no built-in modules, no plug-in group that exists, no kind
    contracts: these rules hold whatever a kind's components are; test_contracts checks those)."""
    return Registry({"policy": (), "judge": ()}, plugin_group="branchpoint.test-no-such-group", contracts={})


def node_a(state, runtime):  # two distinct definitions to register
    return {}


def node_b(state, runtime):
    return {}


def test_names_are_sorted_and_an_unknown_name_lists_the_known_ones():
    r = small()
    r.add("policy", "zeta", node_a)
    r.add("policy", "alpha", node_b)
    assert r.names("policy") == ["alpha", "zeta"]
    with pytest.raises(
        RegistryError, match=r'unknown policy "nope" \(known: alpha, zeta; or name your own as package.module:attr\)'
    ):
        r.get("policy", "nope")
    with pytest.raises(RegistryError, match=r'unknown component kind "widget" \(known: policy, judge\)'):
        r.add("widget", "w", node_a)


def test_a_second_object_under_a_taken_name_names_both_places_and_the_same_one_is_harmless():
    r = small()
    r.add("policy", "p", node_a)
    assert r.add("policy", "p", node_a).obj is node_a  # the same definition again (a re-import)
    with pytest.raises(RegistryError) as err:
        r.add("policy", "p", node_b)
    message = str(err.value)
    assert 'policy "p" is registered twice' in message
    assert "test_rules:node_a" in message and "test_rules:node_b" in message
    r.add("judge", "p", node_b)  # names are per kind
    assert r.get("judge", "p").obj is node_b


def test_names_with_a_colon_are_refused_and_module_attr_resolves_unregistered_objects():
    r = small()
    with pytest.raises(RegistryError, match="contain no"):
        r.add("policy", "a:b", node_a)
    entry = r.get("policy", "tests.registry.test_rules:node_a")
    assert entry.obj is node_a and entry.origin == "tests.registry.test_rules:node_a"
    r.add("policy", "registered-a", node_a, note="x")
    assert r.get("policy", "tests.registry.test_rules:node_a").meta == {"note": "x"}  # its registered entry
    with pytest.raises(RegistryError, match='cannot import module "tests.no_such_module"'):
        r.get("policy", "tests.no_such_module:f")
    with pytest.raises(RegistryError, match='has no attribute "missing"'):
        r.get("policy", "tests.registry.test_rules:missing")


def test_a_plugin_function_is_called_with_the_registry(monkeypatch):
    @plugin
    def register_all(registry: Registry) -> None:
        registry.add("policy", "from-plugin", node_a)

    class EntryPoint:
        name, value, dist = "demo", "demo_pkg:register_all", None

        def load(self):
            return register_all

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [EntryPoint()] if group == "g" else [])
    r = Registry({"policy": ()}, plugin_group="g")
    assert r.names("policy") == ["from-plugin"]


def test_every_builtin_kind_has_registered_components():
    for kind in KINDS:
        assert REGISTRY.names(kind), kind
