"""Conformance of a judge: built as `evaluate` builds it, and its judgments what metrics read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

from branchpoint.evaluation.judges import (
    ALL_LABELS_BY_KIND,
    LABELS_BY_KIND,
    UNPARSEABLE,
    BatchJudge,
    FunctionJudge,
    JudgeFn,
    JudgeRun,
    build_judge,
    judge_records,
)
from branchpoint.registry import REGISTRY, RegistryError
from branchpoint.testing.demo import sample_records
from branchpoint.traces import ExecutionRecord, Judgment


def _fail(name: str, problem: str) -> AssertionError:
    return AssertionError(f'judge "{name}": {problem}')


def _as_batch_judge(judge: str | BatchJudge | Any, settings: Mapping[str, Any] | None, run: JudgeRun) -> BatchJudge:
    if isinstance(judge, str):
        try:
            return build_judge(judge, settings, run)
        except RegistryError as exc:
            raise AssertionError(str(exc)) from None
    if hasattr(judge, "judge_many") and hasattr(judge, "name"):
        batch: BatchJudge = judge
        return batch
    name = getattr(judge, "__name__", type(judge).__name__)
    try:
        REGISTRY.check_component("judge", name, judge, {}, f"{getattr(judge, '__module__', '?')}:{name}")
    except RegistryError as exc:
        raise AssertionError(str(exc)) from None
    return FunctionJudge(name, cast(JudgeFn, judge))


def check_judgments(name: str, records: Sequence[ExecutionRecord], judged: Any) -> None:
    """AssertionError unless `judged` is one list of valid judgments per record: stamped with
    the judge's name, labels of their kind (or UNPARSEABLE), at most one answer and one
    abstention judgment per record, evidence judgments on the record's retrieved documents."""
    if not isinstance(judged, list) or len(judged) != len(records):
        got = len(judged) if isinstance(judged, list) else type(judged).__name__
        raise _fail(name, f"judge_many returned {got} results for {len(records)} records (one list per record)")
    for record, judgments in zip(records, judged):
        where = f"record {record.execution_id}"
        if not isinstance(judgments, list) or not all(isinstance(j, Judgment) for j in judgments):
            raise _fail(name, f"{where}: expected a list of Judgment, got {judgments!r:.80}")
        docs = {d.doc_id for step in record.steps for d in step.retrieved}
        for j in judgments:
            if j.judge != name:
                raise _fail(name, f'{where}: a judgment stamped "{j.judge}", not the judge\'s own name')
            allowed = ALL_LABELS_BY_KIND[j.kind]
            if j.label not in (*allowed, UNPARSEABLE):
                raise _fail(
                    name, f'{where}: label "{j.label}" for kind {j.kind} (expected one of {", ".join(allowed)})'
                )
            if j.kind == "evidence" and getattr(j, "doc_id", None) not in docs:
                raise _fail(
                    name,
                    f"{where}: an evidence judgment of doc_id {getattr(j, 'doc_id', None)!r}, not a retrieved document",
                )
        per_kind = Counter(j.kind for j in judgments if j.kind in LABELS_BY_KIND)
        twice = [k for k, c in per_kind.items() if c > 1]
        if twice:
            raise _fail(name, f"{where}: {per_kind[twice[0]]} {twice[0]} judgments (at most one per record)")


def check_judge(
    judge: str | BatchJudge | Any,
    settings: Mapping[str, Any] | None = None,
    *,
    run: JudgeRun = JudgeRun(),
    records: Sequence[ExecutionRecord] | None = None,
) -> list[list[Judgment]]:
    """Exercise a judge as `branchpoint evaluate` does and raise AssertionError on a violation.

    `judge` is a registered name or `package.module:attr` (built with `settings` and `run`, as
    a spec's `evaluation` section builds it), a `BatchJudge`, or a per-record function. It
    judges `records` (default: the kit's correct, wrong, abstained, malformed and cut-off
    records, `demo.sample_records`); the judgments must be what the metrics read
    (`check_judgments`), judging again must give the same labels, and `judge_records` must
    replace the judge's earlier judgments rather than add to them. Returns the judgments.
    """
    built = _as_batch_judge(judge, settings, run)
    name = built.name
    records = list(records or sample_records())
    first = built.judge_many(records)
    check_judgments(name, records, first)
    again = built.judge_many(records)
    labels = [[(j.kind, j.label, getattr(j, "doc_id", None)) for j in js] for js in first]
    if [[(j.kind, j.label, getattr(j, "doc_id", None)) for j in js] for js in again] != labels:
        raise _fail(name, "judging the same records again gave other labels")
    once = judge_records(records, built)
    twice = judge_records(once, built)
    if [len(r.judgments) for r in twice] != [len(r.judgments) for r in once]:
        raise _fail(name, "judging judged records again added judgments instead of replacing its own")
    return first
