"""A search-value study with its models wired in, as `branchpoint value` runs it.

`evaluation.value.value_study` reads traces only and takes a model client and a text encoder as
arguments; this module (in `experiments`, which wires models and retrieval together) opens them:
the run's own agent model (RUN_DIR/spec.yaml) for the LLM forecaster, and the packaged MiniLM
encoder for the text head (`config.text_head`). It also imports the user's modules that
register forecasters, so that their names can be scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from branchpoint.errors import InputError
from branchpoint.evaluation.value.config import ValueConfig
from branchpoint.evaluation.value.study import value_study
from branchpoint.registry import import_module_from

TEXT_HEAD_ENCODER = "minilm-onnx"


def import_forecaster_modules(modules: Sequence[str], search_paths: Sequence[Path] = ()) -> None:
    """Import modules that register `@forecaster` functions, from the working directory, the
    run spec's folder (`search_paths`) or anything on the import path (one InputError naming a
    module that fails)."""
    for module in modules:
        try:
            import_module_from(module, search_paths)
        except ImportError as exc:
            raise InputError(f"--forecaster-module {module}: cannot import ({exc})") from None


def run_value_study(
    path: Path,
    *,
    config: ValueConfig,
    forecast_files: Sequence[Path] = (),
    llm_forecaster: bool = False,
    out_dir: Path | None = None,
    progress: bool = True,
    three_pair: Sequence[Path] | None = None,
    settings_source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`value_study` on a fork study, with the run's model as LLM forecaster when `llm_forecaster`
    and the MiniLM encoder when `config.text_head`; the model is closed when the study ends."""
    with ExitStack() as stack:
        client, style = None, "chat"
        if llm_forecaster:
            from branchpoint.evaluation.value.llm import run_model_spec
            from branchpoint.models import open_model

            model_spec = run_model_spec(path)
            client, style = stack.enter_context(open_model(model_spec, log_dir=path)), model_spec.style
        text_encoder = None
        if config.text_head:
            from branchpoint.retrieval.encoder import get_encoder

            text_encoder = get_encoder(TEXT_HEAD_ENCODER).encode
        return value_study(
            path,
            config=config,
            forecast_files=forecast_files,
            llm_client=client,
            llm_style=style,
            out_dir=out_dir,
            progress=progress,
            text_encoder=text_encoder,
            three_pair=three_pair,
            settings_source=settings_source,
        )
