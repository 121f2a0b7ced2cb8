"""Files a page's commands name that the reader is assumed to have, made as the page says they
were made: a FlashRAG corpus and bare faiss index files (FlashRAG's index builder: the passage
form of each corpus row, a `Flat` inner-product `faiss.index_factory` index, row i = line i), and
the specs a page shows in a yaml block whose first line is `# FILENAME`.

The corpus is the packaged demo corpus in FlashRAG's `{"id", "contents"}` shape (the page ran
on a 1,000-passage FlashRAG sample; only the counts in its outputs differ)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from branchpoint.retrieval.encoder_settings import BGE_QUERY_INSTRUCTION, EncoderSettings

WIKI = "wiki-18.jsonl"


def write_flashrag_corpus(root: Path) -> Path:
    """`wiki-18.jsonl`: the demo corpus as FlashRAG rows."""
    from branchpoint.datasets.questions import demo_corpus_path
    from branchpoint.retrieval import load_corpus

    path = root / WIKI
    if not path.exists():
        rows = [{"id": p.doc_id, "contents": p.contents} for p in load_corpus(demo_corpus_path())]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_short_corpus(root: Path) -> Path:
    """`wiki-18-short.jsonl`: the corpus without its last row (an index's corpus that does not match)."""
    path = root / "wiki-18-short.jsonl"
    if not path.exists():
        lines = write_flashrag_corpus(root).read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(lines[:-1]), encoding="utf-8")
    return path


def write_flashrag_index(
    root: Path, name: str, encoder: str, retrieval_method: str | None = None, settings: EncoderSettings | None = None
) -> Path:
    """A bare faiss file over `wiki-18.jsonl`, encoded as FlashRAG's index builder encodes it."""
    import faiss

    from branchpoint.retrieval.encoder import get_encoder

    path = root / name
    if path.exists():
        return path
    rows = [json.loads(line) for line in write_flashrag_corpus(root).open(encoding="utf-8")]
    vectors = get_encoder(encoder, retrieval_method=retrieval_method, settings=settings).encode_passages(
        [r["contents"] for r in rows]
    )
    index = faiss.index_factory(vectors.shape[1], "Flat", faiss.METRIC_INNER_PRODUCT)
    index.add(vectors)
    faiss.write_index(index, str(path))
    return path


def write_shown_file(page: Path, name: str, root: Path) -> Path:
    """The yaml block of `page` whose first line is `# NAME`, written to `root/NAME` as shown."""
    from tests.docs.shell import shell_blocks

    for _start, lang, body in shell_blocks(page.read_text(encoding="utf-8")):
        if lang in ("yaml", "yml") and body.splitlines()[:1] == [f"# {name}"]:
            path = root / name
            path.write_text(body + "\n", encoding="utf-8")
            return path
    raise AssertionError(f"{page}: a command names {name}, but no yaml block starts with '# {name}'")


#: Index files the pages serve, by name: (encoder, FlashRAG retrieval_method, settings), each the
#: encoder its page's command gives (after `HUB_ENCODERS` in tests/docs/pages.py).
INDEX_FILES: dict[str, tuple[str, str | None, EncoderSettings | None]] = {
    "minilm_Flat.index": ("minilm-onnx", None, None),
    "e5_Flat.index": ("minilm-onnx", "e5", None),
    "bge_Flat.index": ("minilm-onnx", None, EncoderSettings(query_prefix=BGE_QUERY_INSTRUCTION, pooling="cls")),
}

#: Makers of the FlashRAG files, by the name a command gives.
FLASHRAG_FILES: dict[str, Callable[[Path], Path]] = {
    WIKI: write_flashrag_corpus,
    "wiki-18-short.jsonl": write_short_corpus,
    **{
        name: (lambda root, name=name, made=made: write_flashrag_index(root, name, *made))
        for name, made in INDEX_FILES.items()
    },
}
