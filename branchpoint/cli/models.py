"""`branchpoint models serve vllm|sim`: model servers for experiments."""

from __future__ import annotations

from pathlib import Path

import typer

from branchpoint.cli.common import console, err_console, friendly_errors
from branchpoint.errors import BranchpointError

models_app = typer.Typer(
    help="Model servers for experiments (vLLM on GPU machines).\n\n"
    "Example: branchpoint models serve vllm --model Qwen/Qwen3-8B --reasoning-parser qwen3 --tool-call-parser hermes",
    no_args_is_help=True,
)
serve_app = typer.Typer(
    help="Start an OpenAI-compatible model server and keep it running.\n\n"
    "Example: branchpoint models serve vllm --model Qwen/Qwen3-8B --dry-run",
    no_args_is_help=True,
)
models_app.add_typer(serve_app, name="serve")


@serve_app.command("vllm")
@friendly_errors
def models_serve_vllm(
    model: str = typer.Option(..., "--model", help="Hugging Face id or local path of the model."),
    tensor_parallel: int = typer.Option(1, "--tensor-parallel", min=1, help="GPUs to split the model over."),
    reasoning_parser: str | None = typer.Option(
        None, "--reasoning-parser", help="vLLM reasoning parser (qwen3, deepseek_r1, openai_gptoss ...)."
    ),
    tool_call_parser: str | None = typer.Option(
        None,
        "--tool-call-parser",
        help="vLLM tool-call parser (hermes for Qwen3, openai for gpt-oss); adds --enable-auto-tool-choice.",
    ),
    max_model_len: int | None = typer.Option(None, "--max-model-len", min=1, help="Context length."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0: every interface)."),
    gpu_memory_utilization: float | None = typer.Option(
        None, "--gpu-memory-utilization", min=0.01, max=1.0, help="Fraction of GPU memory vLLM may use."
    ),
    served_model_name: str | None = typer.Option(
        None, "--served-model-name", help="Name clients send (default: the model)."
    ),
    extra: list[str] = typer.Option(
        [], "--extra", help="More `vllm serve` arguments, split like a shell line; repeatable."
    ),
    startup_timeout: float = typer.Option(
        900.0, "--startup-timeout", min=1.0, help="Seconds to wait for the server to answer /v1/models."
    ),
    log: Path | None = typer.Option(None, "--log", help="vLLM's log file (default: a temporary file)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the vllm command and exit."),
) -> None:
    """Start `vllm serve` on 127.0.0.1, wait until it answers, print the spec block; Ctrl-C stops it.

    Example: branchpoint models serve vllm --model Qwen/Qwen3-8B --reasoning-parser qwen3
    --tool-call-parser hermes --max-model-len 32768
    """
    import shlex
    import tempfile

    from branchpoint.models.vllm import (
        VllmServeOptions,
        VllmServer,
        all_interfaces,
        serve_until_stopped,
        spec_block,
        vllm_command,
        vllm_launcher,
    )

    opts = VllmServeOptions(
        model=model,
        host=host,
        port=port,
        tensor_parallel=tensor_parallel,
        reasoning_parser=reasoning_parser,
        tool_call_parser=tool_call_parser,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        served_model_name=served_model_name,
        extra_args=[arg for chunk in extra for arg in shlex.split(chunk)],
        startup_timeout_s=startup_timeout,
    )
    if dry_run:
        try:
            launcher = vllm_launcher()
        except BranchpointError:
            launcher = ["vllm"]  # a dry run also works where vLLM is not installed
        typer.echo(shlex.join(vllm_command(opts, launcher)))
        return
    log = log or Path(tempfile.gettempdir()) / f"branchpoint-vllm-{port}.log"
    server = VllmServer(opts, log_path=log, launcher=vllm_launcher())  # no vLLM: one line saying how to install

    def ready(base_url: str) -> None:
        console.print(f"[bold green]vLLM is ready[/] at {base_url} (model {opts.name}); Ctrl-C stops it.")
        if all_interfaces(host):
            console.print(f"listening on every interface: from other machines use http://<this host>:{port}/v1")
        console.print("Paste into your experiment spec:\n", highlight=False)
        typer.echo(spec_block(opts, base_url))

    err_console.print(
        f"starting: {shlex.join(vllm_command(opts, server.launcher))}\n"
        f"waiting up to {startup_timeout:.0f} s for /v1/models; log: {log}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    serve_until_stopped(server, ready)
    err_console.print("vLLM server stopped.", highlight=False)


@serve_app.command("sim")
@friendly_errors
def models_serve_sim(
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on (127.0.0.1)."),
    profile: str = typer.Option(
        "instruct",
        "--profile",
        help="Built-in profile (instruct, over_searching, search_helps_little, runs_past_search) or a YAML file.",
    ),
    questions: str = typer.Option("demo", "--questions", help="The question set it knows (a path, or demo)."),
    seed: int = typer.Option(0, "--seed", help="Seed of its own generator (requests without a seed)."),
    latency_scale: float = typer.Option(
        1.0, "--latency-scale", min=0.0, help="Multiplies the latency model (0: none)."
    ),
    capacity: bool = typer.Option(False, "--capacity", help="Continuous batching under a tokens/s ceiling."),
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="Default: branchpoint-sim-PROFILE."),
    spec: Path | None = typer.Option(None, "--spec", help="A spec whose retrieval the /v1/sim/truth endpoint uses."),
    reasoning_parser: str = typer.Option(
        "qwen3", "--reasoning-parser", help="As vLLM's (needed for thinking_token_budget); 'none': no parser."
    ),
    tool_call_parser: str = typer.Option("hermes", "--tool-call-parser", help="As vLLM's; 'none': no tool parser."),
    auto_tools: bool = typer.Option(
        True, "--enable-auto-tool-choice/--no-enable-auto-tool-choice", help="As vLLM's: tool_choice auto allowed."
    ),
) -> None:
    """Start the simulated model (known truth, vLLM's wire format) on 127.0.0.1; Ctrl-C stops it.

    Example: branchpoint models serve sim --profile over_searching --port 8001
    """
    import yaml

    from branchpoint.models.spec import SimServerSpec
    from branchpoint.models.vllm import serve_until_stopped
    from branchpoint.sim import SimServer
    from branchpoint.sim.profile import load_profile
    from branchpoint.sim.vllm_rules import ServerFlags

    prof = load_profile(profile)  # a bad profile: one line, before anything starts
    name = served_model_name or prof.served_name
    flags = ServerFlags(  # as vLLM, refuses --enable-auto-tool-choice without --tool-call-parser
        None if reasoning_parser in ("", "none") else reasoning_parser,
        auto_tools,
        None if tool_call_parser in ("", "none") else tool_call_parser,
    )
    sim = SimServerSpec(
        profile=profile,
        questions=questions,
        seed=seed,
        latency_scale=latency_scale,
        capacity=capacity,
        port=port,
        reasoning_parser=flags.reasoning_parser,
        tool_call_parser=flags.tool_call_parser,
        enable_auto_tool_choice=flags.enable_auto_tool_choice,
    )
    server = SimServer(sim, served_name=name, truth_spec=str(spec) if spec else None)

    def ready(base_url: str) -> None:
        console.print(
            f"[bold green]simulated model ready[/] at {base_url} (model {name}, profile {prof.name}); Ctrl-C stops it."
        )
        console.print("Paste into your experiment spec:\n", highlight=False)
        block = {"model": {"provider": "openai", "base_url": base_url, "name": name, "style": "chat"}}
        typer.echo(yaml.safe_dump(block, sort_keys=False))

    serve_until_stopped(server, ready)
    err_console.print("simulated model server stopped.", highlight=False)
