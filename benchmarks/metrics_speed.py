"""Metrics speed: `compute_metrics` with 1,000 question resamples on a synthetic sweep.

Builds a search-cap × reasoning-effort sweep (20 caps × 3 efforts × N questions, half of them
unanswerable) with pre-judged records, then times compute_metrics (every statistic with its
bootstrap interval, by condition and category, the cross-condition views) and, for scale, the
same with the bootstrap off.

    .venv/bin/python benchmarks/metrics_speed.py [--questions 500] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from branchpoint.evaluation import MetricsConfig, compute_metrics
from branchpoint.traces import ExecutionRecord, Judgment


def sweep(questions: int, seed: int = 0) -> list[ExecutionRecord]:
    rng = np.random.default_rng(seed)
    records = []
    for cap in range(20):
        for effort in ("low", "medium", "high"):
            condition = {"agent.search_cap": cap, "model.reasoning_effort": effort}
            for i in range(questions):
                answerable = i % 2 == 0
                if answerable:
                    label = Judgment(judge="j", kind="answer", label="CORRECT" if rng.random() < 0.5 else "INCORRECT")
                else:
                    label = Judgment(
                        judge="j", kind="abstention", label="ABSTAINED" if rng.random() < 0.3 else "ANSWERED"
                    )
                records.append(
                    ExecutionRecord(
                        execution_id=f"{cap}-{effort}-{i}",
                        run_id="bench",
                        condition=condition,
                        question_id=f"q{i}",
                        question="?",
                        answerable=answerable,
                        category=None if answerable else ("AU", "FP", "UC")[i % 3],
                        output_tokens=int(rng.integers(10, 200)),
                        input_tokens=int(rng.integers(200, 2000)),
                        search_calls=int(rng.integers(0, cap + 1)),
                        judgments=[label],
                    )
                )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    records = sweep(args.questions)
    print(f"{len(records):,} records, 60 conditions, {args.questions} questions each")
    for resamples in (0, args.resamples):
        start = time.perf_counter()
        compute_metrics(records, "j", MetricsConfig(bootstrap=resamples))
        took = time.perf_counter() - start
        print(f"compute_metrics, {resamples:>5} resamples: {took:6.2f} s ({len(records) / took:,.0f} records/s)")
    print(
        f"reproduce: .venv/bin/python benchmarks/metrics_speed.py --questions {args.questions} --resamples {args.resamples}"
    )


if __name__ == "__main__":
    main()
