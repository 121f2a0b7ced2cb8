"""Balanced seeded samples of a question set (`questions.sample` in specs, `--sample A,U`)."""

from __future__ import annotations

import random

from branchpoint.datasets.questions import UNANSWERABLE_CATEGORIES, Question
from branchpoint.errors import InputError


def balanced_sample(questions: list[Question], n_answerable: int, n_unanswerable: int, seed: int) -> list[Question]:
    """A seeded sample of answerable and unanswerable questions, in the input order.

    Unanswerable questions are drawn round-robin over AU, FP, UC, so their counts differ by at
    most one unless a category runs out, in which case the others fill in (and unanswerable
    questions with no category only when all three have run out). The same questions, counts
    and seed always give the same sample. Raises InputError when the pool is too small.
    """
    for name, n in (("n_answerable", n_answerable), ("n_unanswerable", n_unanswerable)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"{name}: expected a non-negative integer, got {n!r}")
    rng = random.Random(seed)
    answerable = [i for i, q in enumerate(questions) if q.answerable]
    groups: dict[str | None, list[int]] = {c: [] for c in (*UNANSWERABLE_CATEGORIES, None)}
    for i, q in enumerate(questions):
        if not q.answerable:
            groups[q.category].append(i)
    n_unans_pool = sum(len(g) for g in groups.values())
    if n_answerable > len(answerable) or n_unanswerable > n_unans_pool:
        raise InputError(
            f"balanced_sample: asked for {n_answerable} answerable and {n_unanswerable} "
            f"unanswerable questions, but the set has {len(answerable)} answerable and "
            f"{n_unans_pool} unanswerable"
        )
    chosen = rng.sample(answerable, n_answerable)
    queues = []
    for key in UNANSWERABLE_CATEGORIES:
        pool = groups[key][:]
        rng.shuffle(pool)
        queues.append(pool)
    need = n_unanswerable
    while need and any(queues):
        for pool in queues:
            if pool and need:
                chosen.append(pool.pop())
                need -= 1
    if need:  # AU, FP and UC ran out: questions with no category fill the rest
        chosen.extend(rng.sample(groups[None], need))
    return [questions[i] for i in sorted(chosen)]
