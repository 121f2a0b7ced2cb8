"""Retrieval interventions: what an agent is shown, changed on purpose, over a base source.

The six kinds (spec kinds `empty`, `random`, `noisy`, `shuffled`, `oracle`, `withheld`; see
`retrieval.sources.interventions`) each turn the base source's top-k list for a query into
another list:

- `empty`: no passages at all (a search that finds nothing; the call still counts);
- `random`: k passages drawn uniformly without replacement from the corpus, ignoring the query;
- `noisy`: the base list with a share p of its positions (round(p·n) of n, positions drawn at
  random) replaced by random corpus passages not already in the list;
- `shuffled`: the base list with its ranks permuted (each passage keeps its score);
- `oracle`: the question's gold passages first — the ids its record lists as supporting
  passages (`Question.support`), else the corpus passages that contain a gold answer (folded:
  lower case, punctuation dropped, on word boundaries) — then the base list without them, cut
  to k. A question with neither is refused (`OracleRefused`); an unanswerable question (no gold
  answers, no support) gets the base list unchanged;
- `withheld`: the base list with the question's gold passages taken out — its supporting
  passage ids and every passage holding a gold answer (folded as for `oracle`) — refilled from
  further down the base's ranking, so an answerable question is unanswerable *given the corpus*
  (the MuSiQue-Full construction). An unanswerable question gets the base list unchanged.

Every draw is a function of (seed, question id, query, kind, k) alone — a numpy Generator seeded
from their SHA-256 — so a rerun and every fork branch of an execution see the same evidence
for the same query (forks replay the retrieval cache, whose key carries the intervention, its
settings, the seed and the question: `BoundIntervention.cache_params`).
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from branchpoint.errors import InputError
from branchpoint.retrieval.corpus import Passage
from branchpoint.retrieval.source import RetrievalSource
from branchpoint.traces import RetrievedDoc

KINDS: tuple[str, ...] = ("empty", "random", "noisy", "shuffled", "oracle", "withheld")
#: Score given to a passage the intervention put in (random draws, gold passages not retrieved).
INSERTED_SCORE = 0.0
#: Corpora up to this many passages draw from a full permutation; larger ones by rejection.
SMALL_CORPUS = 100_000
#: How far down the base's ranking `withheld` reads to refill a list (fewer than k passages when
#: this many all hold the answer).
WITHHELD_DEPTH = 4096


class OracleRefused(InputError):
    """An answerable question without supporting passage ids or a corpus passage holding a gold answer."""


@dataclass(frozen=True)
class SearchContext:
    """What an intervention may know about the execution that searches: the run's seed and the
    question (id, gold answers, supporting passage ids). None fields: not known."""

    seed: int = 0
    question_id: str | None = None
    gold_answers: tuple[str, ...] = ()
    support: tuple[str, ...] = ()


def draw_seed(seed: int, question_id: str | None, query: str, kind: str, k: int) -> int:
    """The 64-bit seed of one search's draws: SHA-256 of (seed, question id, query, kind, k)."""
    text = "\x00".join([str(seed), question_id or "", query, kind, str(k)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def fold(text: str) -> str:
    """Lower case, accents and punctuation dropped, whitespace collapsed, padded with spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " " + " ".join(re.sub(r"[^\w\s]", " ", text).split()) + " "


def holds_answer(passage: Passage | RetrievedDoc, gold_answers: Sequence[str]) -> bool:
    """Whether a gold answer (that folds to something) occurs in the passage's title or text."""
    padded = fold(f"{passage.title or ''} {passage.text}")
    return any(g.strip() and fold(g) in padded for g in gold_answers if fold(g).strip())


def _doc(p: Passage, name: str, score: float = INSERTED_SCORE) -> RetrievedDoc:
    return RetrievedDoc(doc_id=p.doc_id, score=score, text=p.text, title=p.title or None, source=name)


@dataclass
class InterventionSource:
    """One intervention over an optional base source and an optional corpus (random draws and gold
    passages come from it). Search it through `bind(context)`; `search` alone uses no question."""

    name: str
    kind: str
    base: RetrievalSource | None = None
    passages: Sequence[Passage] | None = None
    p: float = 0.0
    base_params: str = ""
    corpus_params: str = ""
    _ids: dict[str, int] | None = field(default=None, init=False, repr=False)
    _gold: dict[str, list[int]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f'source "{self.name}": unknown intervention {self.kind!r} (known: {", ".join(KINDS)})')
        if self.kind in ("noisy", "shuffled", "oracle", "withheld") and self.base is None:
            raise InputError(f'source "{self.name}": kind {self.kind} needs a base source')
        if self.kind in ("random", "noisy", "oracle") and not self.passages:
            raise InputError(f'source "{self.name}": kind {self.kind} needs a corpus with passages')

    @property
    def cache_params(self) -> str:
        """The intervention, its share, the base's and the corpus's fingerprints."""
        return f"intervention={self.kind};p={self.p:g};base=[{self.base_params}];corpus=[{self.corpus_params}]"

    def bind(self, context: SearchContext) -> BoundIntervention:
        """This intervention as one execution sees it (its seed and question)."""
        return BoundIntervention(self, context)

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        """`bind(SearchContext()).search`: seed 0, no question (an oracle refuses)."""
        return self.bind(SearchContext()).search(query, k)

    # --- the lists -------------------------------------------------------------------------

    def results(self, query: str, k: int, ctx: SearchContext) -> list[RetrievedDoc]:
        """The intervened top-k list for `query` under `ctx`."""
        if self.kind == "empty":
            return []
        if self.kind == "withheld":
            return self._withheld(query, k, ctx)
        rng = np.random.default_rng(draw_seed(ctx.seed, ctx.question_id, query, self.kind, k))
        if self.kind == "random":
            return [_doc(self._passage(i), self.name) for i in self._draw(rng, k, exclude=set())]
        base = [d.model_copy(update={"source": self.name}) for d in self._base(query, k)]
        if self.kind == "shuffled":
            return [base[i] for i in rng.permutation(len(base))]
        if self.kind == "noisy":
            return self._noisy(base, rng)
        return self._oracle(base, k, ctx)

    def _base(self, query: str, k: int) -> list[RetrievedDoc]:
        assert self.base is not None
        return list(self.base.search(query, k))

    def _passage(self, i: int) -> Passage:
        assert self.passages is not None
        return self.passages[i]

    def _draw(self, rng: np.random.Generator, m: int, exclude: set[str]) -> list[int]:
        """m distinct corpus positions drawn uniformly, none whose doc id is in `exclude` (fewer
        when the corpus has fewer): a permutation of a small corpus read in order, rejection
        sampling on a large one (no O(corpus) work per search)."""
        n = len(self.passages or ())
        out: list[int] = []
        seen = set(exclude)
        if n <= SMALL_CORPUS:
            candidates: Any = (int(i) for i in rng.permutation(n))
        else:
            candidates = (int(rng.integers(n)) for _ in range(100 * (m + len(exclude)) + 1000))
        for i in candidates:
            if len(out) == m:
                break
            doc_id = self._passage(i).doc_id
            if doc_id not in seen:
                seen.add(doc_id)
                out.append(i)
        return out

    def noisy_count(self, n: int) -> int:
        """How many of n positions a noisy list replaces: round(p·n), halves up."""
        return int(np.floor(self.p * n + 0.5))

    def _noisy(self, base: list[RetrievedDoc], rng: np.random.Generator) -> list[RetrievedDoc]:
        m = self.noisy_count(len(base))
        if m == 0:
            return base
        positions = sorted(int(i) for i in rng.choice(len(base), size=m, replace=False))
        fresh = self._draw(rng, m, exclude={d.doc_id for d in base})
        out = list(base)
        for pos, i in zip(positions, fresh, strict=False):
            out[pos] = _doc(self._passage(i), self.name)
        return out

    def gold_positions(self, ctx: SearchContext) -> list[int]:
        """Corpus positions of the question's gold passages: its support ids (in their order),
        else the passages holding a gold answer (corpus order); OracleRefused for an answerable
        question with neither, [] for one without gold answers or support."""
        key = repr((ctx.question_id, ctx.support, ctx.gold_answers))
        with self._lock:
            if key in self._gold:
                return self._gold[key]
            if self._ids is None:
                self._ids = {p.doc_id: i for i, p in enumerate(self.passages or ())}
            ids = self._ids
        if ctx.support:
            found = [ids[s] for s in ctx.support if s in ids]
        elif ctx.gold_answers:
            found = [i for i, p in enumerate(self.passages or ()) if holds_answer(p, ctx.gold_answers)]
        else:
            found = []
        if not found and (ctx.support or ctx.gold_answers):
            raise OracleRefused(
                f'retrieval source "{self.name}" (oracle): question {ctx.question_id or "?"} has no gold passage '
                f"(support ids {list(ctx.support) or 'none'} not in the corpus, and no passage holds a gold answer "
                f"{list(ctx.gold_answers)})"
            )
        with self._lock:
            self._gold[key] = found
        return found

    def _oracle(self, base: list[RetrievedDoc], k: int, ctx: SearchContext) -> list[RetrievedDoc]:
        gold = [self._passage(i) for i in self.gold_positions(ctx)][:k]
        scores = {d.doc_id: d.score for d in base}
        out = [_doc(p, self.name, scores.get(p.doc_id, INSERTED_SCORE)) for p in gold]
        chosen = {d.doc_id for d in out}
        out += [d for d in base if d.doc_id not in chosen]
        return out[:k]

    def _withheld(self, query: str, k: int, ctx: SearchContext) -> list[RetrievedDoc]:
        """The base's top k without the question's gold passages: the base is asked for more
        (k plus the gold passages it returned, doubling) until k remain or its ranking ends."""
        support = set(ctx.support)

        def gold(d: RetrievedDoc) -> bool:
            return d.doc_id in support or holds_answer(d, ctx.gold_answers)

        depth = k
        while True:
            listed = self._base(query, depth)
            kept = [d for d in listed if not gold(d)]
            if len(kept) >= k or len(listed) < depth or depth >= WITHHELD_DEPTH:
                break
            depth = min(WITHHELD_DEPTH, max(2 * depth, k + len(listed) - len(kept)))
        return [d.model_copy(update={"source": self.name}) for d in kept[:k]]


@dataclass
class BoundIntervention:
    """An intervention bound to one execution's `SearchContext`: a RetrievalSource whose cache
    key names the intervention, its settings, the seed and the question."""

    inner: InterventionSource
    context: SearchContext
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.inner.name

    @property
    def cache_params(self) -> str:
        ctx = self.context
        return f"{self.inner.cache_params};seed={ctx.seed};question={ctx.question_id or ''}"

    def search(self, query: str, k: int) -> list[RetrievedDoc]:
        return self.inner.results(query, k, self.context)


def context_of(question: Any, seed: int) -> SearchContext:
    """The SearchContext of a question record (`datasets.Question` or an `ExecutionRecord`'s
    question fields: `id` / `question_id`, `gold_answers`, `support`) under the run's seed."""
    if question is None:
        return SearchContext(seed=seed)
    qid = getattr(question, "id", None) or getattr(question, "question_id", None)
    return SearchContext(
        seed=seed,
        question_id=qid,
        gold_answers=tuple(getattr(question, "gold_answers", None) or ()),
        support=tuple(getattr(question, "support", None) or ()),
    )
