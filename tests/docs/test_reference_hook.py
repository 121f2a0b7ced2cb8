"""The mkdocs hook that generates the CLI and spec references and includes BENCHMARKS.md
(docs/hooks/reference.py): what it generates, without running mkdocs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from branchpoint.experiments.spec import ExperimentSpec
from tests.conftest import REPO
from tests.docs.hook import load_hook


@pytest.fixture(scope="module")
def hook():
    return load_hook()


def test_cli_reference_has_every_command_and_option(hook):
    root = hook.command_tree()
    text = hook.cli_markdown(root)
    commands = [c for c in hook.walk(root) if c.path]
    assert {"run", "evaluate", "fork", "value", "checkpoints"} <= set(root.subcommands)
    assert ("models", "serve", "vllm") in {c.path for c in commands}
    for cmd in commands:
        assert f"`branchpoint {' '.join(cmd.path)}`" in text
        for option in cmd.options:
            if "--help" not in option.names:
                assert f"`{option.names[0]}`" in text, (cmd.path, option.names)
    run = root.subcommands["run"]
    concurrency = next(o for o in run.options if "--concurrency" in o.names)
    assert concurrency.takes_value and concurrency.default == "1"
    assert not next(o for o in run.options if "--no-progress" in o.names).takes_value


def test_spec_reference_has_every_model_and_field(hook):
    schema = ExperimentSpec.model_json_schema()
    text = hook.spec_markdown(schema)
    for name, model in {"ExperimentSpec": schema, **schema["$defs"]}.items():
        assert f"### `{name}` {{#{name.lower()}}}" in text
        for field in model.get("properties", {}):
            assert f"| `{field}` |" in text, (name, field)
    assert "| `name` | str, matching `^[A-Za-z0-9][A-Za-z0-9_.-]*$` | required |" in text


def test_schema_types_read_like_types(hook):
    assert hook.schema_type({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}) == "int, ≥ 1 or null"
    assert (
        hook.schema_type({"type": "array", "items": {"$ref": "#/$defs/SourceSpec"}})
        == "list of [`SourceSpec`](#sourcespec)"
    )
    assert hook.schema_type({"enum": ["a", "b"]}) == 'one of `"a"`, `"b"`'
    assert hook.schema_type({"type": "object", "additionalProperties": {"type": "string"}}) == "mapping of str to str"


def test_headings_demoted_outside_fences_and_title_dropped(hook):
    text = "# Benchmarks\n\nintro\n\n## A\n\n```bash\n# a comment\n```\n\n### B\n#hashtag\n"
    assert hook.demote_headings(text) == "\nintro\n\n### A\n\n```bash\n# a comment\n```\n\n#### B\n#hashtag\n"


def test_markers_are_replaced_and_other_pages_left_alone(hook):
    config = SimpleNamespace(config_file_path=str(REPO / "mkdocs.yml"))
    page = "# Perf\n\n<!-- generated: benchmarks -->\n"
    out = hook.on_page_markdown(page, config=config)
    assert hook.BENCHMARKS_MARKER not in out and "## Framework overhead per agent step" in out
    assert "\n# Benchmarks" not in out
    assert hook.on_page_markdown("plain page\n", config=config) == "plain page\n"
    spec_page = hook.on_page_markdown(hook.SPEC_MARKER, config=config)
    assert "`ExperimentSpec`" in spec_page


def test_mkdocs_yml_registers_the_hook_and_every_nav_page_exists():
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert "docs/hooks/reference.py" in config["hooks"]

    def pages(nav):
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            yield from pages(value) if isinstance(value, list) else [value]

    listed = list(pages(config["nav"]))
    assert all((REPO / "docs" / p).is_file() for p in listed), [p for p in listed if not (REPO / "docs" / p).is_file()]
    on_disk = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert on_disk == set(listed), on_disk ^ set(listed)
