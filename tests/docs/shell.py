"""Shell blocks of the docs: found, joined into logical lines and split like a shell would
(shared by the command-tree check and the page runner)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

SHELL_LANGUAGES = {"bash", "sh", "shell", "console", "zsh", "shell-session", ""}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}
REDIRECTS = {">", ">>", "<", ">&", "<&", "&>", ">|"}
#: How a command line may start branchpoint (the installed script, or the module).
LAUNCHERS = (
    ("branchpoint",),
    (".venv/bin/branchpoint",),
    ("python", "-m", "branchpoint.cli"),
    (".venv/bin/python", "-m", "branchpoint.cli"),
    ("python3", "-m", "branchpoint.cli"),
)


@dataclass(frozen=True)
class ShellLine:
    """One logical command line of a shell block (continuations joined), where it is written."""

    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)} line {self.line}"


def doc_files() -> list[Path]:
    """README.md and every markdown page of the docs site."""
    return [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts)]


def shell_blocks(text: str) -> list[tuple[int, str, str]]:
    """(first line number, language, body) of every fenced block in a markdown text."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent, body, start = m["fence"], len(m["indent"]), [], i + 2
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        blocks.append((start, m["lang"].lower(), "\n".join(body)))
        i += 1
    return blocks


def logical_lines(path: Path, start: int, lang: str, body: str) -> list[ShellLine]:
    """The command lines of one block: `\\` continuations joined, `$ ` prompts removed; in a
    `console` block only prompted lines are commands (the rest is output)."""
    out, pending, first = [], "", start
    for offset, raw in enumerate(body.splitlines()):
        line = raw.rstrip()
        if not pending:
            first = start + offset
            if lang in ("console", "shell-session") and not line.lstrip().startswith("$ "):
                continue
            if line.lstrip().startswith("$ "):
                line = line.lstrip()[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(ShellLine(path, first, pending + line))
        pending = ""
    if pending:
        out.append(ShellLine(path, first, pending))
    return out


def split_commands(text: str) -> list[list[str]]:
    """A shell line split like a shell would (comments dropped) into its simple commands (split at
    pipes, `&&`, `;`), each without leading `NAME=value` assignments or redirections."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    commands, current = [], []
    for token in [*tokens, ";"]:
        if token in SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    cleaned = []
    for words in commands:
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words = words[1:]
        kept, skip = [], False
        for i, word in enumerate(words):
            if skip:
                skip = False
                continue
            if word in REDIRECTS:
                if kept and kept[-1].isdigit() and i > 0 and words[i - 1] == kept[-1]:
                    kept.pop()  # the `2` of `2>`
                skip = True
                continue
            kept.append(word)
        if kept:
            cleaned.append(kept)
    return cleaned


def branchpoint_args(words: list[str]) -> list[str] | None:
    """The arguments after the launcher when `words` runs branchpoint, else None."""
    for launcher in LAUNCHERS:
        if tuple(words[: len(launcher)]) == launcher:
            return words[len(launcher) :]
    return None


def check_args(root, args: list[str]) -> list[str]:
    """What is wrong with `branchpoint ARGS` against the command tree (empty when nothing)."""
    cmd, i = root, 0
    while cmd.subcommands and i < len(args) and not args[i].startswith("-"):
        if args[i] not in cmd.subcommands:
            known = ", ".join(cmd.subcommands)
            return [f'"{" ".join(("branchpoint", *cmd.path))}" has no command "{args[i]}" (known: {known})']
        cmd, i = cmd.subcommands[args[i]], i + 1
    by_name = {n: o for o in cmd.options for n in o.names}
    errors, name = [], " ".join(("branchpoint", *cmd.path))
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or re.fullmatch(r"-\d[\d.,]*", word):
            continue
        flag, has_value = word.split("=", 1)[0], "=" in word
        if flag == "--help":
            continue
        option = by_name.get(flag)
        if option is None:
            errors.append(f'"{name}" has no option "{flag}"')
        elif option.takes_value and not has_value:
            i += 1  # its value
    return errors


def commands_in_docs() -> list[tuple[ShellLine, list[str]]]:
    """Every branchpoint command written in a shell block of the docs, with where it is."""
    found = []
    for path in doc_files():
        for start, lang, body in shell_blocks(path.read_text(encoding="utf-8")):
            if lang not in SHELL_LANGUAGES:
                continue
            for line in logical_lines(path, start, lang, body):
                if not re.search(r"\bbranchpoint(\.cli)?\b", line.text):
                    continue
                try:
                    words_list = split_commands(line.text)
                except ValueError as exc:  # unbalanced quotes
                    found.append((line, [f"cannot be parsed: {exc}"]))
                    continue
                for words in words_list:
                    args = branchpoint_args(words)
                    if args is not None:
                        found.append((line, args))
    return found
