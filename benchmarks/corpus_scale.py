"""Opening a Wikipedia-scale corpus: a worker's open time and memory must not grow with the corpus.

For each corpus size (default 200,000 and 2,000,000 passages) this script generates a FlashRAG
corpus jsonl (`{"id", "contents"}`, `"Page i"\\ntext` of 40-70 words drawn from a fixed vocabulary,
seeded, from the ~2,000 English words of the demo corpus: about 400 bytes a row) and a FlashRAG-style index file over it, then starts a fresh
worker process that does what every `--processes` or Ray worker does: open the source
(`open_dense_source("wiki", JSONL, "minilm-onnx", index=FILE)`, the FlashRAG route) and serve
1,000 queries (`search_batch`, 100 at a time). The worker reports its open time and its resident
memory (VmRSS, and the peak VmHWM) after its imports, after opening and after the queries.
The MiniLM ONNX session alone takes about 155 MiB and onnxruntime's arena about 50 MiB more once
batches run: both are the same at any corpus size.

The index: faiss `IVF256,PQ16` (inner product) over seeded random unit vectors of MiniLM's
dimension 384, so that the index is small (2M x 16 bytes of codes + ids) and cheap to build on
this 2-core machine; the worker still encodes every query with the real MiniLM and searches the
real faiss index, so the cost measured is the real path's. What the index itself occupies is
reported (its file size, which faiss holds in memory) and subtracted: the target is about the
corpus, i.e. RSS beyond the index and the encoder must not grow with the corpus.

The corpus's one-time pass (offsets + fingerprint, `<corpus>.bpoffsets.*`, written once at
build time and reused by every later open) is timed separately, in the parent.

    .venv/bin/python benchmarks/corpus_scale.py                       # 200k and 2M passages
    .venv/bin/python benchmarks/corpus_scale.py --sizes 20000 --workdir /tmp/cs   # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIM = 384
FACTORY = "IVF256,PQ16"


def status_kib(field: str) -> int:
    """A `VmRSS` / `VmHWM` value of this process in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def vocabulary() -> list[str]:
    """The English words of the packaged demo corpus (about 2,000): passages and queries drawn from
    them tokenize like real text (random letter strings would split into many word pieces)."""
    import re

    from branchpoint.datasets.questions import demo_corpus_path
    from branchpoint.retrieval import load_corpus

    return sorted({w.lower() for p in load_corpus(demo_corpus_path()) for w in re.findall(r"[A-Za-z]+", p.text)})


def write_corpus(path: Path, n: int, seed: int = 0) -> None:
    """n FlashRAG rows, seeded, written in blocks."""
    words = vocabulary()
    rng = random.Random(seed + 1)
    with path.open("w", encoding="utf-8") as fh:
        block = []
        for i in range(n):
            text = " ".join(rng.choices(words, k=rng.randint(40, 70)))
            block.append(json.dumps({"id": str(i), "contents": f'"Page {i}"\n{text}'}) + "\n")
            if len(block) == 10_000:
                fh.write("".join(block))
                block = []
        fh.write("".join(block))


def write_index(path: Path, n: int, seed: int = 0) -> None:
    """A FlashRAG-style faiss file: IVF-PQ over n seeded random unit vectors (row i = passage i)."""
    import faiss
    import numpy as np

    rng = np.random.default_rng(seed)

    def block(rows: int) -> np.ndarray:
        x = rng.standard_normal((rows, DIM), dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    index = faiss.index_factory(DIM, FACTORY, faiss.METRIC_INNER_PRODUCT)
    index.train(block(min(n, 256 * 64)))
    for start in range(0, n, 100_000):
        index.add(block(min(100_000, n - start)))
    faiss.write_index(index, str(path))


def worker(index_file: str, corpus: str, n_queries: int) -> None:
    """Open the source and serve queries; print one JSON line of figures."""
    import faiss  # noqa: F401 - imported first so the baseline includes the libraries

    from branchpoint.retrieval.source import open_dense_source

    baseline = status_kib("VmRSS")  # Python, numpy, faiss, onnxruntime and branchpoint imported
    start = time.perf_counter()
    source = open_dense_source("wiki", corpus, "minilm-onnx", index=index_file)
    open_s = time.perf_counter() - start
    after_open = status_kib("VmRSS")
    words = vocabulary()
    rng = random.Random(7)
    queries = [" ".join(rng.choices(words, k=rng.randint(3, 8))) for _ in range(n_queries)]
    start = time.perf_counter()
    served = 0
    for i in range(0, n_queries, 100):
        served += sum(len(docs) for docs in source.search_batch(queries[i : i + 100], 3))
    query_s = time.perf_counter() - start
    print(
        json.dumps(
            {
                "passages": len(source.index),
                "open_s": open_s,
                "query_s": query_s,
                "served": served,
                "baseline_mib": baseline / 1024,
                "after_open_mib": after_open / 1024,
                "after_queries_mib": status_kib("VmRSS") / 1024,
                "peak_mib": status_kib("VmHWM") / 1024,
                "anon_mib": status_kib("RssAnon") / 1024,
                "file_mib": status_kib("RssFile") / 1024,
                "factory": source.index.manifest.factory,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200000,2000000", help="corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the generated corpora and indexes go (kept; reused when present)",
    )
    parser.add_argument("--worker", nargs=2, metavar=("INDEX", "CORPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.queries)
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="corpus-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    from branchpoint.retrieval.corpus_store import open_mapped_corpus

    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        corpus, index_file = workdir / f"corpus-en-{n}.jsonl", workdir / f"ivfpq-{n}.index"
        if not corpus.is_file():
            start = time.perf_counter()
            write_corpus(corpus, n)
            print(
                f"generated {n} passages ({corpus.stat().st_size / 2**20:.0f} MiB) in "
                f"{time.perf_counter() - start:.0f} s",
                flush=True,
            )
        if not index_file.is_file():
            start = time.perf_counter()
            write_index(index_file, n)
            print(f"built {FACTORY} index of {n} vectors in {time.perf_counter() - start:.0f} s", flush=True)
        start = time.perf_counter()
        open_mapped_corpus(corpus).close()  # the one-time pass (or the reuse of its sidecar)
        scan_s = time.perf_counter() - start
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
        out = subprocess.run(
            [sys.executable, __file__, "--queries", str(args.queries), "--worker", str(index_file), str(corpus)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        index_mib = index_file.stat().st_size / 2**20
        figures.update(
            n=n,
            scan_s=scan_s,
            index_mib=index_mib,
            corpus_mib=corpus.stat().st_size / 2**20,
            beyond_index_mib=figures["after_queries_mib"] - index_mib,
            opened_mib=figures["after_queries_mib"] - figures["baseline_mib"] - index_mib,
        )
        rows.append(figures)
        print(json.dumps(figures), flush=True)
    print()
    print(
        "| passages | corpus file | index (file) | one-time pass | open | 1,000 queries | RSS after | "
        "RSS beyond index | added by open + queries (encoder, corpus map, buffers) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['corpus_mib']:.0f} MiB | {r['index_mib']:.0f} MiB | {r['scan_s']:.1f} s | "
            f"{r['open_s']:.2f} s | {r['query_s']:.1f} s | {r['after_queries_mib']:.0f} MiB | "
            f"{r['beyond_index_mib']:.0f} MiB | {r['opened_mib']:.0f} MiB |"
        )
    print(f"\nreproduce: .venv/bin/python benchmarks/corpus_scale.py --sizes {args.sizes} --workdir {workdir}")


if __name__ == "__main__":
    main()
