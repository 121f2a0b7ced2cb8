"""mkdocs hook: the CLI reference (from the typer app) and the spec reference (from
`ExperimentSpec`'s JSON schema), generated at build time into the pages that hold a marker.

A page that contains `<!-- generated: cli-reference -->` or `<!-- generated: spec-reference -->`
gets the marker replaced by the generated markdown, so nothing generated is committed;
`<!-- generated: benchmarks -->` is replaced by BENCHMARKS.md (repository root), its headings one
level down, so the figures live in one file and are part of the site. The same
walk over the command tree (`command_tree`) is what `tests/docs/test_shell_blocks.py` checks the
docs' shell blocks against. Registered in mkdocs.yml under `hooks:`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLI_MARKER = "<!-- generated: cli-reference -->"
SPEC_MARKER = "<!-- generated: spec-reference -->"
BENCHMARKS_MARKER = "<!-- generated: benchmarks -->"


# -- the command tree --------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    """One `--flag` of a command: every spelling it accepts, and what it takes."""

    names: tuple[str, ...]
    takes_value: bool
    help: str
    default: str
    required: bool


@dataclass(frozen=True)
class Command:
    """One command or group of the CLI, with its path from the root (`("models", "serve", "vllm")`)."""

    path: tuple[str, ...]
    help: str
    arguments: tuple[str, ...]
    options: tuple[Option, ...]
    subcommands: dict[str, Command] = field(default_factory=dict)

    def flags(self) -> set[str]:
        """Every option spelling this command accepts (`--help` included)."""
        return {n for o in self.options for n in o.names} | {"--help"}


def _default_text(param: Any) -> str:
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return ""
    default = getattr(param, "default", None)
    if default is None or callable(default) or default == () or default == []:
        return ""
    if isinstance(default, list | tuple):
        return ", ".join(str(d) for d in default)
    return str(getattr(default, "value", default))


def _to_command(cmd: Any, path: tuple[str, ...]) -> Command:
    """`cmd` (a click command as typer builds it; typer vendors click, so duck-typed) as a Command."""
    options, arguments = [], []
    for p in cmd.params:
        if p.param_type_name == "argument":
            arguments.append((getattr(p, "metavar", None) or p.name).upper())
        elif p.param_type_name == "option":
            options.append(
                Option(
                    names=tuple(p.opts) + tuple(p.secondary_opts),
                    takes_value=not p.is_flag and not getattr(p, "count", False),
                    help=" ".join((p.help or "").split()),
                    default=_default_text(p),
                    required=bool(p.required),
                )
            )
    subs = {}
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        if not getattr(sub, "hidden", False):
            subs[name] = _to_command(sub, (*path, name))
    return Command(path, (cmd.help or "").strip(), tuple(arguments), tuple(options), subs)


def command_tree(app: Any = None) -> Command:
    """The whole CLI as a tree of Commands (the root has the empty path)."""
    import typer.main

    if app is None:
        from branchpoint.cli import app
    return _to_command(typer.main.get_command(app), ())


def walk(cmd: Command) -> Iterator[Command]:
    """`cmd` and every command below it, depth first in the CLI's own order."""
    yield cmd
    for sub in cmd.subcommands.values():
        yield from walk(sub)


# -- CLI reference -----------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _help_markdown(text: str) -> str:
    """A command's help: paragraphs kept; `Example:` lines as code."""
    parts = []
    for para in text.replace("\b", "").split("\n\n"):
        para = " ".join(para.split())
        if para.startswith("Example:"):
            parts.append(f"Example: `{para.removeprefix('Example:').strip()}`")
        elif para:
            parts.append(para)
    return "\n\n".join(parts)


def cli_markdown(root: Command) -> str:
    """One section per command: usage, its help, and a table of its options."""
    out = []
    for cmd in walk(root):
        if not cmd.path:
            continue
        name = " ".join(("branchpoint", *cmd.path))
        level = "#" * min(len(cmd.path) + 2, 6)
        out.append(f"{level} `{name}`\n")
        if cmd.subcommands:
            usage = f"{name} COMMAND [ARGS]..."
        else:
            usage = " ".join((name, *cmd.arguments, "[OPTIONS]" if cmd.options else ""))
        out.append(f"```text\n{usage.strip()}\n```\n")
        if cmd.help:
            out.append(_help_markdown(cmd.help) + "\n")
        if cmd.subcommands:
            out.append("Commands: " + ", ".join(f"`{n}`" for n in cmd.subcommands) + ".\n")
        options = [o for o in cmd.options if "--help" not in o.names]
        if options:
            out.append("| option | default | what it does |\n|---|---|---|")
            for o in options:
                spelled = " / ".join(f"`{n}`" for n in o.names) + (" VALUE" if o.takes_value else "")
                default = "required" if o.required else (f"`{_cell(o.default)}`" if o.default else "")
                out.append(f"| {spelled} | {default} | {_cell(o.help)} |")
            out.append("")
    return "\n".join(out)


# -- spec reference ----------------------------------------------------------------------------
def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    return name.lower()


def schema_type(node: dict[str, Any]) -> str:
    """A JSON-schema node as a short type text (`int ≥ 1`, `list of str`, [`SourceSpec`](#...))."""
    if "$ref" in node:
        name = _ref_name(node["$ref"])
        return f"[`{name}`](#{_anchor(name)})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return " or ".join(dict.fromkeys(schema_type(n) for n in node[key]))
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"list of {schema_type(node['items'])}" if node.get("items") else "list"
    if kind == "object":
        extra = node.get("additionalProperties")
        return f"mapping of str to {schema_type(extra)}" if isinstance(extra, dict) and extra else "mapping"
    names = {"integer": "int", "number": "float", "string": "str", "boolean": "bool", "null": "null"}
    text = names.get(kind, "any") if kind else "any"
    bounds = [
        (k, s)
        for k, s in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))
        if k in node
    ]
    text += "".join(f", {s} {node[k]}" for k, s in bounds)
    if "pattern" in node:
        text += f", matching `{node['pattern']}`"
    return text


def _model_table(name: str, model: dict[str, Any]) -> str:
    out = [f"### `{name}` {{#{_anchor(name)}}}\n"]
    if model.get("description"):
        out.append(model["description"].strip() + "\n")
    props = model.get("properties", {})
    if props:
        required = set(model.get("required", ()))
        out.append("| field | type | default | description |\n|---|---|---|---|")
        for field_name, node in props.items():
            if field_name in required:
                default = "required"
            elif "default" in node:
                default = f"`{_cell(json.dumps(node['default'], ensure_ascii=False))}`"
            else:
                default = ""
            out.append(
                f"| `{field_name}` | {_cell(schema_type(node))} | {default} | "
                f"{_cell(' '.join(node.get('description', '').split()))} |"
            )
        out.append("")
    if model.get("additionalProperties") is False:
        out.append("Unknown fields are refused.\n")
    return "\n".join(out)


def spec_markdown(schema: dict[str, Any]) -> str:
    """The spec's top level, then every model it refers to, in order of first reference."""
    defs = schema.get("$defs", {})
    order: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                name = _ref_name(node["$ref"])
                if name not in order:
                    order.append(name)
                    visit(defs.get(name, {}))
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema.get("properties", {}))
    order += [n for n in defs if n not in order]
    top = {k: v for k, v in schema.items() if k != "$defs"}
    return "\n".join(
        [_model_table(schema.get("title", "ExperimentSpec"), top), *(_model_table(n, defs[n]) for n in order)]
    )


def spec_schema() -> dict[str, Any]:
    from branchpoint.experiments.spec import ExperimentSpec

    return ExperimentSpec.model_json_schema()


# -- BENCHMARKS.md ---------------------------------------------------------------------------------
def demote_headings(markdown: str, drop_title: bool = True) -> str:
    """`markdown` with every ATX heading outside code fences one level down (`#` → `##`), and its
    first `# ` title left out when `drop_title` (the including page has its own)."""
    out, fence, dropped = [], None, not drop_title
    for line in markdown.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = None if fence == mark else (fence or mark)
        elif fence is None and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if line[level : level + 1] == " ":
                if level == 1 and not dropped:
                    dropped = True
                    continue
                line = "#" * min(level + 1, 6) + line[level:]
        out.append(line)
    return "\n".join(out) + "\n"


def _repo_root(config: Any) -> Path:
    config_file = getattr(config, "config_file_path", None) or (config or {}).get("config_file_path")
    return Path(config_file).parent if config_file else Path.cwd()


# -- the mkdocs event ----------------------------------------------------------------------------
def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None, **_: Any) -> str:
    """Replace each reference marker in a page with its generated markdown."""
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_markdown(command_tree()))
    if SPEC_MARKER in markdown:
        markdown = markdown.replace(SPEC_MARKER, spec_markdown(spec_schema()))
    if BENCHMARKS_MARKER in markdown:
        text = (_repo_root(config) / "BENCHMARKS.md").read_text(encoding="utf-8")
        markdown = markdown.replace(BENCHMARKS_MARKER, demote_headings(text))
    return markdown
