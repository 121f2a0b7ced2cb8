"""Every shell block in README.md and docs/**/*.md that names a `branchpoint` command parses, and
its command, subcommands and every flag exist on the typer app (walked in-process; no
subprocess, so it takes well under a second)."""

from __future__ import annotations

import pytest

from tests.docs.hook import load_hook
from tests.docs.shell import (
    branchpoint_args,
    check_args,
    commands_in_docs,
    logical_lines,
    shell_blocks,
    split_commands,
)


@pytest.fixture(scope="module")
def root():
    return load_hook().command_tree()


def test_every_branchpoint_command_in_the_docs_exists_with_its_flags(root):
    found = commands_in_docs()
    assert len(found) > 50, f"only {len(found)} branchpoint commands found in the docs' shell blocks"
    problems = []
    for line, args in found:
        if args and args[0].startswith("cannot be parsed"):
            problems.append(f"{line.where()}: {args[0]}: {line.text}")
            continue
        problems += [f"{line.where()}: {err}: {line.text.strip()}" for err in check_args(root, args)]
    assert not problems, "\n".join(problems)


def test_every_top_level_command_is_shown_somewhere(root):
    shown = {args[0] for _, args in commands_in_docs() if args and not args[0].startswith("-")}
    missing = sorted(set(root.subcommands) - shown)
    assert not missing, f"commands no shell block in the docs shows: {missing}"


def test_lines_are_joined_and_prompts_comments_env_and_pipes_handled(tmp_path):
    body = (
        "$ BRANCHPOINT_CACHE=/tmp/c branchpoint run spec.yaml \\\n"
        "    --concurrency 8   # eight at once\n"
        "some output line\n"
        "$ branchpoint schema trace | jq . > trace.json && branchpoint evaluate runs/x 2> err.log\n"
    )
    lines = logical_lines(tmp_path / "page.md", 10, "console", body)
    assert [ln.line for ln in lines] == [10, 13]
    commands = [split_commands(ln.text) for ln in lines]
    assert commands[0] == [["branchpoint", "run", "spec.yaml", "--concurrency", "8"]]
    assert commands[1] == [["branchpoint", "schema", "trace"], ["jq", "."], ["branchpoint", "evaluate", "runs/x"]]
    assert branchpoint_args(["python", "-m", "branchpoint.cli", "view", "r"]) == ["view", "r"]
    assert branchpoint_args(["pip", "install", "branchpoint[gpu]"]) is None


def test_wrong_commands_and_flags_are_found(root):
    assert check_args(root, ["run", "spec.yaml", "--concurrency", "8", "--out=runs/x"]) == []
    assert check_args(root, ["fork", "runs/x", "--repeats", "-1"]) == []  # a value, not a flag
    assert check_args(root, ["models", "serve", "vllm", "--model", "M", "--dry-run"]) == []
    assert check_args(root, ["rnu", "spec.yaml"]) and "no command" in check_args(root, ["rnu"])[0]
    assert check_args(root, ["run", "spec.yaml", "--concurency", "8"]) == [
        '"branchpoint run" has no option "--concurency"'
    ]
    assert check_args(root, ["checkpoints", "lss"]) != []
    # a value-taking option swallows its value, so a value that looks like a command is no error
    assert check_args(root, ["evaluate", "runs/x", "--judge", "llm", "--judge-model", "Qwen/Qwen3-8B"]) == []


def test_blocks_are_found_with_their_language_and_line(tmp_path):
    text = "intro\n\n```bash\nbranchpoint view runs/q\n```\n\n  ```python\n  import x\n  ```\n"
    assert shell_blocks(text) == [(4, "bash", "branchpoint view runs/q"), (8, "python", "import x")]
