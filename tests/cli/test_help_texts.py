"""What a command's --help says is what its source says: square brackets in help texts (an extra
such as `branchpoint[inspect]`, a YAML list such as `[initial]`) are shown, not taken as rich
markup and dropped."""

from __future__ import annotations

import re

import click
import typer
from typer.testing import CliRunner

from branchpoint.cli import app

runner = CliRunner()


def commands(command: click.Command, path: tuple[str, ...] = ()):
    """Every command and group under `command`, with its path of names."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


def squeezed(text: str) -> str:
    """Text without whitespace and box lines, so wrapping in the help panels does not matter."""
    return re.sub(r"[\s│╭╮╰╯─]+", "", text)


def test_bracketed_text_in_help_is_shown():
    checked = 0
    for path, command in commands(typer.main.get_command(app)):
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        wanted = [m.group(0).replace("\\[", "[") for t in texts for m in re.finditer(r"\\?\[[^\]\n]*\]", t)]
        if not wanted:
            continue
        shown = squeezed(runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output)
        for text in wanted:
            assert squeezed(text) in shown, f"branchpoint {' '.join(path)} --help drops {text!r}"
            checked += 1
    assert checked >= 3


def test_inspect_extra_fork_set_and_run_executor_help():
    out = runner.invoke(app, ["import", "inspect", "--help"], env={"COLUMNS": "200"}).output
    assert "pip install 'branchpoint[inspect]'" in out
    out = squeezed(runner.invoke(app, ["fork", "--help"], env={"COLUMNS": "200"}).output)
    assert "boundaries='[initial]'" in out and "boundaries=''" not in out
    out = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "threads" not in out and "asyncio" in out
