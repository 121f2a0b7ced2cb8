"""Encoding a corpus into passage vectors, resumable: complete shards are saved as they are made,
so a rerun after an interruption encodes only what is missing."""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.corpus_store import fingerprint_of
from branchpoint.retrieval.encoder_base import Encoder, encode_passages

log = logging.getLogger(__name__)

SHARD_STATE = "state.json"


DEFAULT_SHARD_SIZE = 8192


def _progress_bar(description: str, total: int) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()
    )
    progress.add_task(description, total=total)
    return progress


def shard_state(fingerprint: str, encoder: Encoder, n: int, shard_size: int) -> dict[str, Any]:
    """What `state.json` of a shard directory records: shards are reused only by a build of the
    same corpus, encoder (and its max_length: passages cut elsewhere are other vectors),
    dimension, size and shard size."""
    state: dict[str, Any] = {
        "corpus_fingerprint": fingerprint,
        "encoder": encoder.name,
        "dim": encoder.dim,
        "n_passages": n,
        "shard_size": shard_size,
    }
    max_length = getattr(encoder, "max_length", None)
    if max_length is not None:
        state["max_length"] = int(max_length)
    return state


def encode_corpus(
    passages: Sequence[Passage],
    encoder: Encoder,
    batch_size: int = 64,
    *,
    shard_dir: str | Path | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    fingerprint: str | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Passage vectors (`"Title"\\ntext`, with the encoder's passage prefix), `batch_size` a call.

    With `shard_dir`, vectors are also written there as `emb-00000.npy`, ... (`shard_size`
    passages each, written atomically) beside `state.json` (corpus fingerprint, encoder,
    dimension, shard size): a rerun after an interruption loads the complete shards and
    encodes only the rest. Shards of another corpus or encoder are discarded.
    """
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, got {batch_size}")
    if shard_size < 1:
        raise InputError(f"shard_size must be at least 1, got {shard_size}")
    n = len(passages)
    out = np.zeros((n, encoder.dim), dtype=np.float32)
    texts = [p.contents for p in passages]
    shards = [(start, min(start + shard_size, n)) for start in range(0, n, shard_size)]
    done = [False] * len(shards)
    directory = Path(shard_dir) if shard_dir is not None else None
    if directory is not None:
        state = shard_state(fingerprint or fingerprint_of(passages), encoder, n, shard_size)
        _prepare_shard_dir(directory, state)
        for i, (start, stop) in enumerate(shards):
            vectors = _read_shard(directory / f"emb-{i:05d}.npy", stop - start, encoder.dim)
            if vectors is not None:
                out[start:stop] = vectors
                done[i] = True
    reused = sum(stop - start for (start, stop), d in zip(shards, done) if d)
    bar = _progress_bar(f"encoding {n} passages ({encoder.name})", n) if progress else None
    if bar is not None:
        bar.start()
        bar.update(bar.task_ids[0], completed=reused)
    try:
        for i, (start, stop) in enumerate(shards):
            if done[i]:
                continue
            for b in range(start, stop, batch_size):
                e = min(b + batch_size, stop)
                out[b:e] = encode_passages(encoder, texts[b:e], batch_size=batch_size)
                if bar is not None:
                    bar.update(bar.task_ids[0], advance=e - b)
            if directory is not None:
                _write_shard(directory / f"emb-{i:05d}.npy", out[start:stop])
    finally:
        if bar is not None:
            bar.stop()
    return out


def _prepare_shard_dir(directory: Path, state: dict[str, Any]) -> None:
    """Create the shard directory, discarding shards that belong to another corpus or encoder."""
    state_file = directory / SHARD_STATE
    if state_file.is_file():
        try:
            old = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old == state:
            return
        log.warning("%s: shards of another corpus, encoder or shard size; encoding anew", directory)
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SHARD_STATE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, state_file)


def _read_shard(path: Path, rows: int, dim: int) -> np.ndarray | None:
    """A complete shard's vectors, or None (absent, damaged, or of the wrong shape)."""
    if not path.is_file():
        return None
    try:
        vectors: np.ndarray = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable shard, encoding it again (%s)", path, exc)
        return None
    if vectors.shape != (rows, dim) or vectors.dtype != np.float32:
        log.warning("%s: shard of shape %s, expected (%d, %d); encoding it again", path, vectors.shape, rows, dim)
        return None
    return vectors


def _write_shard(path: Path, vectors: np.ndarray) -> None:
    """np.save into a temporary file, then rename it into place (a shard is whole or absent)."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}.npy")
    try:
        np.save(tmp, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
