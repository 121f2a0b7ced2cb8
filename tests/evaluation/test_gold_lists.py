"""Gold lists that look like alias dumps: flagged per question, in metrics.json and the log."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from branchpoint.evaluation import MetricsConfig, evaluate
from branchpoint.evaluation.gold_lists import alias_dump_signals, gold_list_warnings
from branchpoint.traces import write_records
from tests.evaluation.builders import make_record

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"  # ../shared/data beside the checkout
if not DATA.is_dir():  # a worktree under /work/wt: the main checkout's neighbour
    DATA = Path("/work/shared/data")
#: A SelfAware-style list (TriviaQA aliases): case variants, a Wikipedia title, a redirect of
#: something else.
BANANA_OIL = [
    "Isoamyl acetate",
    "isoamyl acetate",
    "Isopentyl acetate",
    "Banana oil",
    "banana oil",
    "Pear oil (solvent)",
    "Conventional vehicle",
]


def test_alias_dump_signals():
    signals = alias_dump_signals(BANANA_OIL)
    assert signals == {
        "case_variants": ["isoamyl acetate", "banana oil"],
        "wikipedia_titles": ["Pear oil (solvent)"],
        "unrelated_entries": ["Conventional vehicle"],
    }
    # two signals are enough; one is not
    assert set(alias_dump_signals(BANANA_OIL[:4] + ["banana oil", "Conventional vehicle"])) == {
        "case_variants",
        "unrelated_entries",
    }
    assert alias_dump_signals(["Isoamyl acetate", "Isopentyl acetate", "Banana oil", "banana oil", "pear oil"]) == {}
    # honest lists: a short list, and a multi-answer list of unrelated names
    assert alias_dump_signals(["Isoamyl acetate", "isoamyl acetate", "Conventional vehicle (car)"]) == {}
    assert (
        alias_dump_signals(["Gene Kelly", "Donald O'Connor", "Judy Garland", "Debbie Reynolds", "Mickey Rooney"]) == {}
    )


def test_evaluate_warns_per_question_in_metrics_and_log(tmp_path, caplog):
    records = [
        make_record("oil", gold=BANANA_OIL, answer="Conventional vehicle", execution_id="e1"),
        make_record("oil", gold=BANANA_OIL, answer="Nectar", execution_id="e2"),  # same question: one warning
        make_record("rome", gold=["Rome"], answer="Rome"),
    ]
    write_records(tmp_path / "executions.jsonl", records)
    with caplog.at_level(logging.WARNING, logger="branchpoint.evaluation.gold_lists"):
        metrics = evaluate(tmp_path, judge="rule", cfg=MetricsConfig(bootstrap=0))
    [warning] = metrics["gold_list_warnings"]
    assert (warning["question_id"], warning["n_gold"]) == ("oil", 7)
    assert warning["signals"] == ["case_variants", "unrelated_entries", "wikipedia_titles"]
    assert "Conventional vehicle" in warning["examples"]
    assert [r.getMessage() for r in caplog.records if "alias dump" in r.getMessage()] == [
        "question oil: its 7 gold answers look like an alias dump (case_variants, unrelated_entries, "
        "wikipedia_titles: isoamyl acetate; banana oil; Pear oil (solvent); Conventional vehicle); "
        "check them before trusting its grades"
    ]
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["gold_list_warnings"][0]["question_id"] == "oil"
    # no alias dump, no key
    write_records(tmp_path / "executions.jsonl", records[2:])
    assert "gold_list_warnings" not in evaluate(tmp_path, judge="rule", cfg=MetricsConfig(bootstrap=0))


def test_honest_question_sets_are_rarely_flagged():
    path = DATA / "answerable" / "nq_open_dev.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [make_record(str(i), gold=row["answer"]) for i, row in enumerate(rows)]
    assert len(gold_list_warnings(records)) <= 0.005 * len(records)  # 6 of 3,610 when written


def test_selfaware_rows_if_present():
    """SelfAware's answerable rows (TriviaQA-style alias lists) are flagged; not in ../shared/data
    when this was written, so this runs only where a copy is present."""
    found = sorted(DATA.glob("**/[Ss]elf[Aa]ware*.json"))
    if not found:
        pytest.skip(f"no SelfAware file under {DATA}")
    from branchpoint.datasets import load_questions

    questions = [q for q in load_questions(found[0]) if q.answerable]
    records = [make_record(q.id, gold=q.gold_answers) for q in questions]
    assert gold_list_warnings(records)
