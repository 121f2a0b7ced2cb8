"""Security audit as tests: no unpickling or eval of inputs, YAML loaded safely, servers bind
loopback unless told otherwise, API keys never written anywhere, output names stay in the run dir."""

from __future__ import annotations

import ast
import logging
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.experiments import RunStore
from branchpoint.experiments.spec import load_spec
from tests.conftest import REPO
from tests.servers.openai_fault_server import FaultConfig, FaultServer

PACKAGE = REPO / "branchpoint"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
runner = CliRunner()


def package_sources() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"), str(p))) for p in sorted(PACKAGE.rglob("*.py"))]


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


UNSAFE_CALLS = {
    "eval",
    "exec",
    "compile",
    "pickle.load",
    "pickle.loads",
    "pickle.Unpickler",
    "cPickle.loads",
    "dill.load",
    "dill.loads",
    "cloudpickle.load",
    "cloudpickle.loads",
    "marshal.load",
    "marshal.loads",
    "shelve.open",
    "torch.load",
    "yaml.unsafe_load",
    "yaml.full_load",
    "yaml.load_all",
    "os.system",
    "os.popen",
    "joblib.load",
    "jsonpickle.decode",
}
UNSAFE_IMPORTS = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "jsonpickle"}


def test_no_pickle_eval_exec_or_unsafe_yaml_in_the_package():
    found = []
    for path, tree in package_sources():
        where = path.relative_to(REPO)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{where}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in UNSAFE_IMPORTS]
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func)
            kwargs = {k.arg: k.value for k in node.keywords}
            if name in UNSAFE_CALLS:
                found.append(f"{where}:{node.lineno} calls {name}")
            elif name == "yaml.load":
                loader = dotted(kwargs.get("Loader") or (node.args[1] if len(node.args) > 1 else ast.Name("?")))
                if not loader.endswith(("SafeLoader", "CSafeLoader")):
                    found.append(f"{where}:{node.lineno} yaml.load without SafeLoader")
            elif name.endswith(("np.load", "numpy.load")):
                flag = kwargs.get("allow_pickle")
                if isinstance(flag, ast.Constant) and flag.value:
                    found.append(f"{where}:{node.lineno} np.load(allow_pickle=True)")
            shell = kwargs.get("shell")
            if isinstance(shell, ast.Constant) and shell.value:
                found.append(f"{where}:{node.lineno} {name}(shell=True)")
    assert not found, "\n".join(found)


def test_host_defaults_in_the_package_are_loopback():
    """Every `host` parameter, field or `--host` option defaults to a loopback address."""
    bad, seen = [], 0
    for path, tree in package_sources():
        for node in ast.walk(tree):
            pairs: list[tuple[str, ast.AST | None]] = []
            if isinstance(node, ast.FunctionDef):
                args = node.args.args + node.args.kwonlyargs
                defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
                defaults += node.args.kw_defaults
                pairs += [(a.arg, d) for a, d in zip(args, defaults)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                pairs.append((node.target.id, node.value))
            for name, default in pairs:
                if name != "host" or default is None:
                    continue
                if isinstance(default, ast.Call) and default.args:  # typer.Option("127.0.0.1", ...), Field(...)
                    default = default.args[0]
                if isinstance(default, ast.Constant) and isinstance(default.value, str):
                    seen += 1
                    if default.value not in LOOPBACK:
                        bad.append(f"{path.relative_to(REPO)}:{node.lineno} host defaults to {default.value!r}")
    assert seen >= 4 and not bad, bad


def test_model_servers_bind_loopback_unless_told_otherwise():
    from branchpoint.models.llamacpp import server_command
    from branchpoint.models.spec import EmbeddedServerSpec, ModelSpec
    from branchpoint.models.vllm import VllmServeOptions, vllm_command

    def host_of(cmd: list[str]) -> str:
        return cmd[cmd.index("--host") + 1]

    assert ModelSpec().server.host == "127.0.0.1"
    assert host_of(server_command(EmbeddedServerSpec(), Path("m.gguf"), "m", 1234)) == "127.0.0.1"
    assert host_of(server_command(EmbeddedServerSpec(host="0.0.0.0"), Path("m.gguf"), "m", 1234)) == "0.0.0.0"
    assert host_of(vllm_command(VllmServeOptions(model="m"))) == "127.0.0.1"
    result = runner.invoke(app, ["models", "serve", "vllm", "--model", "m", "--dry-run"])
    assert result.exit_code == 0 and host_of(shlex.split(result.output.strip())) == "127.0.0.1"
    result = runner.invoke(app, ["models", "serve", "vllm", "--model", "m", "--host", "0.0.0.0", "--dry-run"])
    assert host_of(shlex.split(result.output.strip())) == "0.0.0.0"


def test_every_yaml_read_is_safe():
    """The only YAML loader calls in the package are `yaml.safe_load` (checked above for the rest)."""
    calls = [
        (path, dotted(n.func))
        for path, tree in package_sources()
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and dotted(n.func).startswith("yaml.") and "load" in dotted(n.func)
    ]
    assert calls and {name for _, name in calls} == {"yaml.safe_load"}


SENTINEL = "sk-branchpoint-SENTINEL-7f3a9c1e5d"


def invoke_all(commands: list[list[str]], codes: tuple[int, ...] = (0, 1, 3)) -> list[str]:
    """Each command's output, in order; every exit code must be one of `codes`."""
    outputs = []
    for args in commands:
        result = runner.invoke(app, args)
        outputs.append(result.output)
        assert result.exit_code in codes, (args, result.output)
    return outputs


def assert_key_nowhere(key: str, run_dir: Path, outputs: list[str], capfd, caplog) -> None:
    """`key` is in no file of the run folder, no command output, nothing printed, no log."""
    leaks = [p for p in run_dir.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert not leaks, leaks
    captured = capfd.readouterr()
    assert not any(key in out for out in [*outputs, captured.out, captured.err])
    assert key not in caplog.text


def test_api_key_is_used_but_never_written_or_printed(tmp_path, monkeypatch, caplog, capfd):
    monkeypatch.setenv("BP_SECRET_KEY", SENTINEL)
    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.0)
    caplog.set_level(logging.DEBUG)  # even debug logs of the HTTP clients must not carry the key
    config = FaultConfig(error_rate=0.2, drop_rate=0.1, truncate_rate=0.1, seed=5)
    with FaultServer(config) as server:
        spec = {
            "name": "secret",
            "questions": {"path": "demo", "limit": 12},
            "model": {
                "provider": "openai",
                "base_url": server.base_url,
                "name": "m",
                "max_tokens": 16,
                "timeout_s": 2.0,
                "retries": 1,
                "api_key_env": "BP_SECRET_KEY",
            },
            "agent": {"policy": "constrained", "search": False},
        }
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
        run_dir = tmp_path / "run"
        outputs = invoke_all(  # exit code 3: some executions incomplete (faults)
            [
                ["run", str(spec_path), "--out", str(run_dir), "--no-progress"],
                ["fork", str(run_dir), "--actions", "THINK", "--repeats", "1", "--no-progress"],
                ["evaluate", str(run_dir), "--bootstrap", "10"],
                ["report", str(run_dir)],
                ["runs", "verify", str(run_dir)],
                ["checkpoints", "ls", str(run_dir), "--json"],
            ]
        )
    assert f"Bearer {SENTINEL}" in config.authorization, "the key from the environment was sent"
    assert config.counts["error"] + config.counts["drop"] + config.counts["truncate"] > 0
    assert_key_nowhere(SENTINEL, run_dir, outputs, capfd, caplog)
    assert "BP_SECRET_KEY" in (run_dir / "spec.yaml").read_text()  # the variable's name, not its value


def test_missing_api_key_variable_is_named_not_guessed(tmp_path, monkeypatch):
    monkeypatch.delenv("BP_UNSET_KEY", raising=False)
    from branchpoint.models.openai_transport import resolve_api_key
    from branchpoint.models.spec import ModelSpec

    with pytest.raises(InputError, match="environment variable BP_UNSET_KEY is not set"):
        resolve_api_key(ModelSpec(provider="openai", base_url="http://127.0.0.1:1/v1", api_key_env="BP_UNSET_KEY"))
    with pytest.raises(Exception, match="Extra inputs are not permitted"):
        ModelSpec(provider="openai", api_key="sk-in-the-spec")  # keys cannot be written into specs


@pytest.mark.parametrize("name", ["../up", "a/b", "/abs", ".hidden", "..", "a\\b", "", "run name", "~home"])
def test_run_names_cannot_escape_the_runs_folder(tmp_path, name):
    """`name` becomes the default run folder (runs/<name>): no separators, no leading dot."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": name}), encoding="utf-8")
    with pytest.raises(InputError, match='field "name"'):
        load_spec(path)


CANARY_BUILT: list[str] = []


@dataclass
class Canary:
    """A class a hostile checkpoint names; building it would be running code of the writer's choosing."""

    note: str = ""

    def __post_init__(self) -> None:
        CANARY_BUILT.append(self.note)


def test_checkpoints_never_rebuild_objects_they_name(tmp_path):
    """A checkpoint database written by someone else cannot make us import or call anything."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    from branchpoint.checkpoints import sqlite_checkpointer
    from branchpoint.experiments.verify_stores import read_only_checkpointer

    db = tmp_path / "checkpoints.sqlite"
    import sqlite3

    conn = sqlite3.connect(db, check_same_thread=False)
    hostile = SqliteSaver(conn, serde=JsonPlusSerializer(allowed_msgpack_modules=True))  # LangGraph's default
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"boundary": "initial", "evidence": [Canary("built")]}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    hostile.put(config, checkpoint, {"source": "loop", "step": 0}, {})
    assert hostile.get_tuple(config).checkpoint["channel_values"]["evidence"][0] == Canary("built")
    conn.close()
    CANARY_BUILT.clear()
    for opener in (sqlite_checkpointer, read_only_checkpointer):
        with opener(db) as saver:
            values = saver.get_tuple(config).checkpoint["channel_values"]
        assert values["boundary"] == "initial" and not isinstance(values["evidence"][0], Canary)
    assert CANARY_BUILT == []


def test_a_server_quoting_the_authorization_header_leaks_no_key(tmp_path, monkeypatch, caplog, capfd):
    """HTTP 500 bodies and a 401 that quote `Authorization: Bearer <key>`: the key reaches no file
    of the run (traces, checkpoints, caches, judged files), no console output and no log."""
    monkeypatch.setenv("BP_SECRET_KEY", SENTINEL)
    monkeypatch.setattr("branchpoint.models.openai_compat.wait_exponential", lambda **kw: lambda rs: 0.0)
    caplog.set_level(logging.DEBUG)
    config = FaultConfig(error_rate=0.5, seed=3, echo_auth=True)
    outputs = []
    with FaultServer(config) as server:
        spec = {
            "name": "echo",
            "questions": {"path": "demo", "limit": 8},
            "model": {
                "provider": "openai",
                "base_url": server.base_url,
                "name": "m",
                "max_tokens": 16,
                "timeout_s": 2.0,
                "retries": 0,
                "api_key_env": "BP_SECRET_KEY",
            },
            "agent": {"policy": "constrained", "search": False},
        }
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
        run_dir = tmp_path / "run"
        result = runner.invoke(app, ["run", str(spec_path), "--out", str(run_dir), "--no-progress"])
        outputs.append(result.output)
        assert result.exit_code == 3, result.output  # some executions incomplete
        errors = [r.error for r in RunStore(run_dir).records() if r.error]
        assert errors and all("Bearer ***" in e for e in errors), errors
        for args in (["evaluate", str(run_dir), "--bootstrap", "10"], ["runs", "verify", str(run_dir)]):
            outputs.append(runner.invoke(app, args).output)
        config.error_rate, config.unauthorized_rate = 0.0, 1.0  # every request now refused with 401
        result = runner.invoke(app, ["run", str(spec_path), "--out", str(run_dir), "--no-progress"])
        outputs.append(result.output)
        assert result.exit_code == 2 and "HTTP 401" in result.output and "Bearer ***" in result.output, result.output
    assert f"Bearer {SENTINEL}" in config.authorization
    assert_key_nowhere(SENTINEL, run_dir, outputs, capfd, caplog)


def test_a_key_quoted_in_200_replies_is_stored_and_printed_nowhere(tmp_path, monkeypatch, caplog, capfd):
    """The model's own text quotes the Authorization header (the search query and the answer):
    redaction applies to every text from a server or model, so the key reaches no trace,
    judged.jsonl, checkpoints.sqlite, retrieval_cache.sqlite, viewer export or `checkpoints ls`."""
    from branchpoint.datasets.questions import demo_corpus_path

    monkeypatch.setenv("BP_SECRET_KEY", SENTINEL)
    monkeypatch.setenv("BRANCHPOINT_CACHE", str(tmp_path / "cache"))
    caplog.set_level(logging.DEBUG)
    config = FaultConfig(search_once=True, echo_key_in_reply=True)
    with FaultServer(config) as server:
        spec = {
            "name": "echo-reply",
            "questions": {"path": "demo", "limit": 6},
            "model": {"provider": "openai", "base_url": server.base_url, "name": "m", "api_key_env": "BP_SECRET_KEY"},
            "agent": {"policy": "constrained", "search_cap": 1, "top_k": 2},
            "retrieval": {"default": "demo", "sources": {"demo": {"kind": "bm25", "corpus": str(demo_corpus_path())}}},
        }
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")
        run_dir = tmp_path / "run"
        outputs = invoke_all(
            [
                ["run", str(spec_path), "--out", str(run_dir), "--no-progress"],
                ["fork", str(run_dir), "--actions", "THINK", "--repeats", "1", "--no-progress"],
                ["evaluate", str(run_dir), "--bootstrap", "10"],
                ["checkpoints", "ls", str(run_dir), "--json"],
                ["checkpoints", "ls", str(run_dir)],
                ["view", str(run_dir), "--export", str(run_dir / "viewer")],
                ["runs", "verify", str(run_dir)],
            ],
            codes=(0,),
        )
    assert f"Bearer {SENTINEL}" in config.authorization, "the key was sent"
    records = RunStore(run_dir).records()
    assert records and all("Bearer ***" in (r.final_answer or "") for r in records)  # the echo, masked
    assert any("Bearer ***" in (s.query or "") for r in records for s in r.steps)  # the query too
    assert {"checkpoints.sqlite", "retrieval_cache.sqlite", "judged.jsonl"} <= {p.name for p in run_dir.iterdir()}
    assert_key_nowhere(SENTINEL, run_dir, outputs, capfd, caplog)


def test_redact_removes_keys_tokens_and_key_fields():
    from branchpoint.redact import redact

    env = {"MY_API_KEY": "abcdefgh12345", "HOME": "/root", "SHORT_TOKEN": "abc"}
    text = (
        '401: {"authorization": "Bearer tok_9f8e7d6c5b"} api_key=zzzsecretzzz sk-proj-AAAABBBBCCCC '
        "value abcdefgh12345 Basic dXNlcjpwYXNz"
    )
    out = redact(text, ["zzzsecretzzz"], environ=env)
    for secret in ("tok_9f8e7d6c5b", "zzzsecretzzz", "sk-proj-AAAABBBBCCCC", "abcdefgh12345", "dXNlcjpwYXNz"):
        assert secret not in out, out
    assert redact("Bearer bonds and the weather", environ={}) == "Bearer bonds and the weather"
    assert redact(None) == ""


def test_checkpoints_option_refuses_other_schemes_without_echoing_a_password():
    from branchpoint.checkpoints.store import check_target

    assert check_target("runs/x/checkpoints.sqlite") == "runs/x/checkpoints.sqlite"
    assert check_target("postgres://u@h/db") == "postgres://u@h/db"
    for bad in ("mysql://x", "postgresq://user:hunter2@db/runs", "states.db", "sqlite:///a.sqlite"):
        with pytest.raises(
            InputError, match="expected a .sqlite file path or a postgres:// / postgresql:// URL"
        ) as err:
            check_target(bad)
        assert "hunter2" not in str(err.value)
