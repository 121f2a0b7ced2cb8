"""Retrieval figures on the shared 10k-passage Wikipedia summaries, for each index kind.

Prints: passages/s of the encoder; for flat, hnsw, ivf (default parameters) and bm25: build
time, query latency (one query at a time, and per query in a batch) and recall@10 against the
exact index; and the overhead of our batch search path (`DenseSource.search_batch`: encode +
faiss + trace documents) over the bare calls (`encoder.encode_queries` + `faiss_index.search`)
as a ratio. Target: ratio ≤ 1.2.

The corpus vectors are encoded once (resumably, in shards) into the cache folder and reused by
later runs; the encoding rate is measured on a fresh sample each run.

    .venv/bin/python benchmarks/retrieval.py [--encoder minilm-onnx] [--queries 200] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import best_of
from branchpoint.retrieval import (
    BM25Index,
    BM25Source,
    DenseIndex,
    DenseSource,
    corpus_fingerprint,
    encode_corpus,
    get_encoder,
    load_corpus,
)
from branchpoint.retrieval.encoder_base import encode_queries

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "corpora" / "wikipedia_vital_summaries_en.json"
K = 10


def paired(ours, bare, repeats: int) -> tuple[float, float]:
    """Fastest times of two calls timed alternately, so drifting load hits both alike."""
    ours_t, bare_t = [], []
    for _ in range(repeats):
        ours_t.append(best_of(ours, 1))
        bare_t.append(best_of(bare, 1))
    return min(ours_t), min(bare_t)


def recall(got: list, want: list, k: int = K) -> float:
    return float(np.mean([len({p.doc_id for p, _ in g} & {p.doc_id for p, _ in w}) / k for g, w in zip(got, want)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="minilm-onnx")
    parser.add_argument("--queries", type=int, default=200, help="queries (article descriptions)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N passages")
    parser.add_argument("--encode-sample", type=int, default=256, help="passages timed for passages/s")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("BRANCHPOINT_CACHE", Path.home() / ".cache" / "branchpoint")) / "bench",
    )
    args = parser.parse_args()

    passages = load_corpus(CORPUS)[: args.limit]
    entries = list(json.loads(CORPUS.read_text(encoding="utf-8")).values())[: len(passages)]
    rng = np.random.default_rng(0)
    picked = rng.choice(len(entries), size=min(args.queries, len(entries)), replace=False)
    queries = [entries[i].get("description") or entries[i]["title"] for i in picked]
    encoder = get_encoder(args.encoder)
    fingerprint = corpus_fingerprint(passages)
    print(
        f"corpus: {CORPUS.name}, {len(passages)} passages; encoder {encoder.name} (dim {encoder.dim}); "
        f"{len(queries)} queries, k={K}; best of {args.repeats} runs"
    )

    sample = [p.contents for p in passages[: args.encode_sample]]
    start = time.perf_counter()
    encoder.encode_passages(sample, batch_size=64)
    encode_rate = len(sample) / (time.perf_counter() - start)
    print(f"encode: {encode_rate:.1f} passages/s ({len(sample)} passages, batch 64)")

    shard_dir = args.cache / f"{fingerprint[:16]}-{encoder.name.replace('/', '_')}"
    start = time.perf_counter()
    vectors = encode_corpus(
        passages,
        encoder,
        64,
        shard_dir=shard_dir,
        shard_size=1024,
        fingerprint=fingerprint,
        progress=sys.stderr.isatty(),
    )
    print(f"corpus vectors: {time.perf_counter() - start:.1f} s (shards in {shard_dir}; reused when present)")
    query_vectors = encode_queries(encoder, queries, batch_size=64)

    exact_hits = None
    rows = []
    for kind in ("flat", "hnsw", "ivf"):
        start = time.perf_counter()
        index = DenseIndex.from_vectors(passages, vectors, encoder, kind=kind, fingerprint=fingerprint)
        build_s = time.perf_counter() - start
        source = DenseSource("bench", index, encoder)
        hits = index.search_vectors(query_vectors, K)
        exact_hits = exact_hits or hits
        single = [best_of(lambda v=v: index.search_vectors(v[None, :], K), 3) for v in query_vectors[:50]]
        batch_vec, bare_vec = paired(
            lambda: index.search_vectors(query_vectors, K),
            lambda: index.faiss_index.search(query_vectors, K),
            args.repeats,
        )
        ours, bare = paired(
            lambda: source.search_batch(queries, K),
            lambda: index.faiss_index.search(encode_queries(encoder, queries), K),
            args.repeats,
        )
        rows.append(
            (
                kind,
                json.dumps(index.manifest.params),
                build_s,
                statistics.median(single) * 1e3,
                batch_vec / len(queries) * 1e3,
                recall(hits, exact_hits),
                ours / bare,
                batch_vec / bare_vec,
            )
        )

    start = time.perf_counter()
    bm25 = BM25Index.build(passages)
    bm25_build = time.perf_counter() - start
    bm25_source = BM25Source("bench", bm25)
    single = [best_of(lambda q=q: bm25.search([q], K), 3) for q in queries[:50]]
    batch, bare = paired(
        lambda: bm25_source.search_batch(queries, K),
        lambda: bm25.retriever.retrieve(
            bm25._tokenize(queries, return_ids=False), k=K, show_progress=False, n_threads=0
        ),
        args.repeats,
    )
    rows.append(
        (
            "bm25",
            json.dumps({k: v for k, v in bm25.manifest.params.items() if k in ("k1", "b")}),
            bm25_build,
            statistics.median(single) * 1e3,
            batch / len(queries) * 1e3,
            None,
            batch / bare,
            None,
        )
    )

    print()
    print(
        f"{'kind':5} {'params':52} {'build s':>8} {'1 query ms':>10} {'batch ms/q':>10} "
        f"{'recall@10':>9} {'ours/bare':>9} {'(vectors)':>9}"
    )
    for kind, params, build_s, one_ms, batch_ms, rec, ratio, vec_ratio in rows:
        print(
            f"{kind:5} {params:52} {build_s:8.2f} {one_ms:10.3f} {batch_ms:10.3f} "
            f"{'-' if rec is None else f'{rec:.3f}':>9} {ratio:9.3f} "
            f"{'-' if vec_ratio is None else f'{vec_ratio:.2f}':>9}"
        )
    print()
    print(
        "1 query ms: one query vector at a time (median over 50); batch ms/q: the batch of all "
        "queries, per query (vectors already encoded)."
    )
    print(
        "ours/bare: DenseSource.search_batch(queries) / (encode_queries + faiss search), and for "
        "bm25 BM25Source.search_batch / (bm25s tokenize + retrieve): target <= 1.2."
    )
    print(
        "(vectors): search_vectors + passages / bare faiss search on encoded queries: the "
        "wrapping cost without the encoder."
    )
    print(
        f"reproduce: .venv/bin/python benchmarks/retrieval.py --encoder {args.encoder} "
        f"--queries {args.queries}" + (f" --limit {args.limit}" if args.limit else "")
    )


if __name__ == "__main__":
    main()
