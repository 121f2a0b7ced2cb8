"""Benchmark builder: match every unanswerable question with a similar answerable one.

An abstention benchmark is only fair when its answerable and unanswerable halves look alike: if
the unanswerable questions are longer, or about other topics, a model can tell them apart
without knowing anything. `build_benchmark` pairs them up as the over-searching study did:

1. embed every question (unit vectors; cosine similarity = inner product);
2. for each unanswerable question, take its `k` most similar answerable questions and keep those
   whose length in words is within ±`length_tolerance` of its own (0.5: half to one and a half
   times as long);
3. match greedily by similarity over all kept pairs, most similar first, each answerable
   question used at most once (an unanswerable question whose candidates are all taken by closer
   pairs stays unmatched);
   Pairs below `min_similarity` are dropped, and so are near-duplicates (the same question on
   both sides: equal text once case and punctuation are ignored, or cosine similarity of at
   least `near_duplicate`), which would pair a question with itself;
4. balance the categories: the same number of matched pairs for every unanswerable category
   present (AU / FP / UC; questions with no category form their own group), the size of the
   smallest group or `per_category` if smaller, drawn with `seed`.

The result holds the selected questions (each unanswerable question followed by its match, in the
unanswerable input order), the pairs with their similarity, and summaries: question length per
side and the similarity distribution of the selected pairs.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from branchpoint.datasets import UNANSWERABLE_CATEGORIES, load_questions_with_report
from branchpoint.datasets.questions import Question
from branchpoint.errors import InputError
from branchpoint.traces import write_files_atomically

NO_CATEGORY = "none"
"""Group name, in summaries, of unanswerable questions without a category."""

_CHUNK = 256
"""Unanswerable questions scored against the whole answerable pool at once."""


class TextEncoder(Protocol):
    """What the builder needs from an encoder: one vector per text (normalised here)."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class MatchedPair:
    """An unanswerable question and the answerable question matched to it."""

    unanswerable: Question
    answerable: Question
    similarity: float
    """Cosine similarity of the two questions' embeddings."""
    vectors: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    """The two questions' unit embeddings (unanswerable, answerable), for the pairing figure's
    t-SNE view; not written to the pairs file."""

    @property
    def category(self) -> str:
        return self.unanswerable.category or NO_CATEGORY

    def to_json(self) -> dict[str, Any]:
        return {
            "unanswerable_id": self.unanswerable.id,
            "answerable_id": self.answerable.id,
            "category": self.unanswerable.category,
            "similarity": round(self.similarity, 6),
            "unanswerable_words": word_count(self.unanswerable.question),
            "answerable_words": word_count(self.answerable.question),
        }


@dataclass
class BuildResult:
    """The benchmark `build_benchmark` selected, and how it got there."""

    questions: list[Question]
    """Each selected unanswerable question followed by its matched answerable question."""
    pairs: list[MatchedPair]
    per_category: dict[str, int]
    """Selected pairs per unanswerable category (equal by construction)."""
    counts: dict[str, int]
    """unanswerable / answerable (inputs), no_candidate (no answerable question of similar length
    among its k most similar), taken (every candidate went to a closer pair), matched, selected."""
    lengths: dict[str, dict[str, float]]
    """Words per selected question, per side: {"unanswerable"|"answerable": {mean, median}}."""
    similarity: dict[str, float]
    """Cosine similarity of the selected pairs: mean, median, p10, p90."""
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    """Things a reader of the benchmark should know (caps that did not bind, missing gold)."""

    def summary(self) -> dict[str, Any]:
        """Everything but the questions, as plain JSON-ready values."""
        return {
            "settings": self.settings,
            "counts": self.counts,
            "per_category": self.per_category,
            "lengths": self.lengths,
            "similarity": self.similarity,
            "notes": self.notes,
        }


def word_count(text: str) -> int:
    """Length of a question in whitespace-separated words (at least 1)."""
    return max(1, len(text.split()))


def _unit_rows(vectors: Any, n: int, side: str) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != n:
        raise InputError(
            f"encoder returned an array of shape {array.shape} for {n} {side} questions (expected ({n}, dim))"
        )
    if not np.isfinite(array).all():
        raise InputError(f"encoder returned non-finite values for the {side} questions")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return cast(np.ndarray, array / np.clip(norms, 1e-12, None))


def _check_inputs(
    unanswerable: list[Question],
    answerable: list[Question],
    k: int,
    length_tolerance: float,
    per_category: int | None,
) -> None:
    if not unanswerable:
        raise InputError("unanswerable: no questions (expected at least one unanswerable question)")
    if not answerable:
        raise InputError("answerable: no questions (expected at least one answerable question)")
    sides = (("unanswerable", unanswerable, False), ("answerable", answerable, True))
    for side, questions, want in sides:
        wrong = next((q for q in questions if q.answerable is not want), None)
        if wrong is not None:
            kind = "answerable" if wrong.answerable else "unanswerable"
            raise InputError(f'{side}: question "{wrong.id}" is {kind} (expected only {side} questions on this side)')
    seen: dict[str, str] = {}
    for side, questions in (("unanswerable", unanswerable), ("answerable", answerable)):
        for q in questions:
            if q.id in seen:
                raise InputError(
                    f'{side}: duplicate id "{q.id}" (also among the {seen[q.id]} questions); '
                    "question ids must be unique across both sides of a benchmark"
                )
            seen[q.id] = side
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k: expected a positive integer, got {k!r}")
    tol = length_tolerance
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0 <= tol < math.inf):
        raise InputError(f"length_tolerance: expected a non-negative number, got {tol!r}")
    if per_category is not None and (
        isinstance(per_category, bool) or not isinstance(per_category, int) or per_category < 1
    ):
        raise InputError(f"per_category: expected a positive integer or None, got {per_category!r}")


def _squashed(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _candidates(
    u_vecs: np.ndarray,
    a_vecs: np.ndarray,
    u_words: np.ndarray,
    a_words: np.ndarray,
    k: int,
    length_tolerance: float,
) -> list[tuple[float, int, int]]:
    """(similarity, unanswerable index, answerable index) for each unanswerable question's k most
    similar answerable questions whose length is within the tolerance."""
    kk = min(k, a_vecs.shape[0])
    out: list[tuple[float, int, int]] = []
    for start in range(0, u_vecs.shape[0], _CHUNK):
        sims = u_vecs[start : start + _CHUNK] @ a_vecs.T
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        for row, js in enumerate(top):
            i = start + row
            low, high = u_words[i] * (1 - length_tolerance), u_words[i] * (1 + length_tolerance)
            out.extend((float(sims[row, j]), i, int(j)) for j in js if low <= a_words[j] <= high)
    return out


def _describe(values: list[float]) -> dict[str, float]:
    return {"mean": float(statistics.fmean(values)), "median": float(statistics.median(values))}


def build_benchmark(
    unanswerable: list[Question],
    answerable: list[Question],
    encoder: TextEncoder,
    k: int = 30,
    length_tolerance: float = 0.5,
    per_category: int | None = None,
    seed: int = 0,
    min_similarity: float | None = None,
    near_duplicate: float = 0.98,
) -> BuildResult:
    """Pair each unanswerable question with a similar answerable one and balance the categories.

    encoder: anything with `encode(texts) -> array (n, dim)`, e.g.
    `branchpoint.retrieval.get_encoder("minilm-onnx")`; rows are L2-normalised here, so the inner
    product is the cosine similarity.
    k: answerable candidates considered per unanswerable question (the most similar ones).
    length_tolerance: a candidate's length in words must lie within ±this fraction of the
    unanswerable question's (0.5 with 10 words: 5 to 15).
    per_category: at most this many pairs per category (default: the smallest category's count).
    seed: which matched pairs a category keeps when it has more than the others.
    min_similarity: drop candidate pairs less similar than this (cosine; default: keep all).
    near_duplicate: drop candidate pairs at least this similar, or with the same text (ignoring
    case and punctuation): the same question on both sides.

    Raises InputError for empty or mixed-up inputs, ids shared by both sides, bad settings, and
    when a category present in the input has no matched pair (raise k or length_tolerance).
    """
    _check_inputs(unanswerable, answerable, k, length_tolerance, per_category)
    u_vecs = _unit_rows(encoder.encode([q.question for q in unanswerable]), len(unanswerable), "unanswerable")
    a_vecs = _unit_rows(encoder.encode([q.question for q in answerable]), len(answerable), "answerable")
    if u_vecs.shape[1] != a_vecs.shape[1]:
        raise InputError(
            f"encoder returned {u_vecs.shape[1]}-d and {a_vecs.shape[1]}-d vectors for the two "
            "sides (expected one dimension)"
        )
    u_words = np.array([word_count(q.question) for q in unanswerable])
    a_words = np.array([word_count(q.question) for q in answerable])

    candidates = _candidates(u_vecs, a_vecs, u_words, a_words, k, length_tolerance)
    u_text = [_squashed(q.question) for q in unanswerable]
    a_text = [_squashed(q.question) for q in answerable]
    duplicates = {(i, j) for sim, i, j in candidates if sim >= near_duplicate or u_text[i] == a_text[j]}
    below = {(i, j) for sim, i, j in candidates if min_similarity is not None and sim < min_similarity}
    candidates = [c for c in candidates if (c[1], c[2]) not in duplicates and (c[1], c[2]) not in below]
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    match: dict[int, tuple[int, float]] = {}
    used: set[int] = set()
    for sim, i, j in candidates:  # greedy: the most similar free pair first
        if i not in match and j not in used:
            match[i] = (j, sim)
            used.add(j)
    with_candidate = {i for _, i, _ in candidates}
    matched = [
        MatchedPair(unanswerable[i], answerable[j], sim, (u_vecs[i], a_vecs[j]))
        for i, (j, sim) in sorted(match.items())
    ]
    counts = {
        "unanswerable": len(unanswerable),
        "answerable": len(answerable),
        "no_candidate": len(unanswerable) - len(with_candidate),
        "taken": len(with_candidate) - len(match),
        "matched": len(match),
        "near_duplicate_pairs": len(duplicates),
        "below_min_similarity_pairs": len(below),
    }
    if not matched:
        floor = f" and at least {min_similarity:g} similar" if min_similarity is not None else ""
        raise InputError(
            f"no unanswerable question has an answerable question within ±{length_tolerance:g} "
            f"of its length{floor} among its {k} most similar (raise k or length_tolerance, lower "
            "--min-similarity, or add answerable questions)"
        )

    groups: dict[str, list[MatchedPair]] = {}
    for pair in matched:
        groups.setdefault(pair.category, []).append(pair)
    present = [
        c
        for c in (*UNANSWERABLE_CATEGORIES, NO_CATEGORY)
        if any((q.category or NO_CATEGORY) == c for q in unanswerable)
    ]
    empty = [c for c in present if c not in groups]
    if empty:
        raise InputError(
            f"no {' or '.join(empty)} question found a match (matched: "
            f"{', '.join(f'{c} {len(groups[c])}' for c in present if c in groups)}); "
            "categories are balanced, so the benchmark would be empty: raise k or "
            "length_tolerance, add answerable questions, or leave that category out"
        )
    smallest = min(present, key=lambda c: len(groups[c]))
    n = len(groups[smallest])
    notes: list[str] = []
    if per_category is not None and per_category > n:
        notes.append(
            f"per_category {per_category} is more than the smallest category has "
            f"({smallest}: {n} matched pairs): {n} per category"
        )
    n = min(n, per_category or n)
    rng = random.Random(seed)
    order = {q.id: i for i, q in enumerate(unanswerable)}
    selected = sorted(
        (pair for c in present for pair in rng.sample(groups[c], n)),
        key=lambda p: order[p.unanswerable.id],
    )
    counts["selected"] = len(selected)

    if duplicates:
        notes.append(
            f"{len(duplicates)} candidate pairs dropped as near-duplicates (the same question on both sides: "
            f"same text, or similarity ≥ {near_duplicate:g})"
        )
    if counts["no_candidate"]:
        notes.append(
            f"{counts['no_candidate']} unanswerable questions had no answerable question within "
            f"±{length_tolerance:g} of their length among their {k} most similar"
        )
    no_gold = sum(1 for p in selected if not p.answerable.gold_answers)
    if no_gold:
        notes.append(
            f"{no_gold} selected answerable questions have no gold answers: score them by whether "
            "the model answered, not by correctness"
        )
    sims = [p.similarity for p in selected]
    return BuildResult(
        questions=[q for p in selected for q in (p.unanswerable, p.answerable)],
        pairs=selected,
        per_category={c: n for c in present},
        counts=counts,
        lengths={
            "unanswerable": _describe([word_count(p.unanswerable.question) for p in selected]),
            "answerable": _describe([word_count(p.answerable.question) for p in selected]),
        },
        similarity={
            **_describe(sims),
            "p10": float(np.percentile(sims, 10)),
            "p90": float(np.percentile(sims, 90)),
        },
        settings={
            "k": k,
            "length_tolerance": length_tolerance,
            "per_category": per_category,
            "seed": seed,
            "min_similarity": min_similarity,
            "near_duplicate": near_duplicate,
        },
        notes=notes,
    )


def write_benchmark(path: str | Path, result: BuildResult, pairs_path: str | Path | None = None) -> None:
    """Write the questions as `branchpoint` jsonl (readable by `load_questions`), atomically;
    with `pairs_path`, also one line per pair (ids, category, similarity, lengths)."""
    write_files_atomically({Path(path): "".join(q.model_dump_json() + "\n" for q in result.questions)})
    if pairs_path is not None:
        write_files_atomically({Path(pairs_path): "".join(json.dumps(p.to_json()) + "\n" for p in result.pairs)})


def parse_file_category(item: str | Path) -> tuple[Path, str | None]:
    """`FILE[:CATEGORY]` (CATEGORY one of AU, FP, UC) as (path, category or None)."""
    text = str(item)
    head, sep, tail = text.rpartition(":")
    if sep and tail.upper() in UNANSWERABLE_CATEGORIES and head:
        return Path(head), tail.upper()
    if sep and head and "/" not in tail and "." not in tail and tail:
        raise InputError(
            f"--unanswerable {text}: unknown category {tail!r} (expected FILE or FILE:AU, FILE:FP, FILE:UC)"
        )
    return Path(text), None


def _load_side(
    path: str | Path, fmt: str, answerable: bool, category: str | None = None, split: str | None = None
) -> list[Question]:
    report = load_questions_with_report(path, fmt, split=split if _is_freshqa(path, fmt) else None)
    questions = [q for q in report.questions if q.answerable is answerable]
    if category is not None:  # a set without subtypes (SelfAware): one category for the whole file
        questions = [q.model_copy(update={"category": category}) for q in questions]
    if not questions:
        side = "answerable" if answerable else "unanswerable"
        raise InputError(
            f"{report.path}: no {side} questions (format {report.fmt}: "
            f"{len(report.questions)} questions, all {'un' if answerable else ''}answerable)"
        )
    return questions


def _is_freshqa(path: str | Path, fmt: str) -> bool:
    from branchpoint.datasets import detect_format

    if fmt != "auto":
        return fmt == "freshqa"
    try:
        return detect_format(Path(path)) == "freshqa"
    except InputError:
        return False


def build_benchmark_from_files(
    unanswerable_path: str | Path | list[str | Path],
    answerable_path: str | Path,
    *,
    unanswerable_format: str = "auto",
    answerable_format: str = "auto",
    encoder: str | TextEncoder = "minilm-onnx",
    k: int = 30,
    length_tolerance: float = 0.5,
    per_category: int | None = None,
    seed: int = 0,
    min_similarity: float | None = None,
    near_duplicate: float = 0.98,
    split: str | None = None,
) -> BuildResult:
    """Load the question files (any registered format, `format_names()`) and build the benchmark.

    Only the unanswerable questions of the unanswerable files and the answerable questions of
    the answerable file are used, so one mixed file (SelfAware, FreshQA, FalseQA) can serve as
    both. `unanswerable_path` may be several files, each `FILE` or `FILE:CATEGORY`: the category
    (AU, FP, UC) then replaces that file's own, for sets without subtypes (SelfAware's
    unanswerable questions load as AU). `split` keeps one FreshQA split (TEST or DEV) of any
    FreshQA file among them. encoder: a name for `branchpoint.retrieval.get_encoder` or an
    encoder object.
    """
    items = unanswerable_path if isinstance(unanswerable_path, list) else [unanswerable_path]
    unanswerable = []
    for item in items:
        path, category = parse_file_category(item)
        unanswerable += _load_side(path, unanswerable_format, answerable=False, category=category, split=split)
    answerable = _load_side(answerable_path, answerable_format, answerable=True, split=split)
    if isinstance(encoder, str):
        from branchpoint.retrieval import get_encoder

        encoder = get_encoder(encoder)
    return build_benchmark(
        unanswerable,
        answerable,
        encoder,
        k=k,
        length_tolerance=length_tolerance,
        per_category=per_category,
        seed=seed,
        min_similarity=min_similarity,
        near_duplicate=near_duplicate,
    )
