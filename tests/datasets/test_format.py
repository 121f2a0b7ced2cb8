"""Question formats are registered components: each built-in one its own module with its own
sniffing, and a new format is one `register_format` call that `fmt="auto"` then detects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branchpoint import registry
from branchpoint.datasets import (
    QuestionFormat,
    detect_format,
    format_names,
    get_format,
    load_questions,
    load_questions_with_report,
    register_format,
)
from branchpoint.datasets.format import KIND, FileHead
from branchpoint.datasets.questions import Question
from branchpoint.datasets.reading import Parsed, Record, iter_jsonl
from branchpoint.errors import InputError


def test_every_builtin_format_is_its_own_module_with_its_own_sniffing():
    for name in format_names():
        fmt = get_format(name)
        assert registry.get(KIND, name).obj is fmt
        assert fmt.parse.__module__.startswith("branchpoint.datasets.formats.")
        assert fmt.by_name is not None or fmt.sniff is not None, name
    # one module per format: no two formats share a parser module
    modules = [get_format(n).parse.__module__ for n in format_names()]
    assert len(modules) == len(set(modules))


def test_a_registered_format_is_detected_loaded_and_named_in_errors(tmp_path: Path):
    def parse_trivia(path: Path) -> Parsed:
        for where, obj in iter_jsonl(path):
            rec = Record(where, obj, ("trivia_q", "trivia_a"))
            yield (
                where,
                Question(
                    id=f"t-{rec.text('trivia_q')[:8]}",
                    question=rec.text("trivia_q"),
                    answerable=True,
                    gold_answers=rec.answers("trivia_a"),
                ),
                None,
            )

    def sniff(head: FileHead) -> bool:
        return not head.is_csv and "trivia_q" in head.keys

    fmt = QuestionFormat(name="test-trivia", parse=parse_trivia, sniff=sniff)
    register_format(fmt)
    try:
        path = tmp_path / "mine.jsonl"
        path.write_text(json.dumps({"trivia_q": "Capital of Peru?", "trivia_a": "Lima"}) + "\n")
        assert detect_format(path) == "test-trivia"
        report = load_questions_with_report(path)
        assert report.fmt == "test-trivia" and report.questions[0].gold_answers == ["Lima"]
        assert "test-trivia" in format_names()
        with pytest.raises(InputError, match='unknown question format "nope".*test-trivia'):
            load_questions(path, fmt="nope")
        with pytest.raises(InputError, match="registered twice"):
            register_format(QuestionFormat(name="test-trivia", parse=lambda p: iter(())))
    finally:
        registry.REGISTRY._entries.pop((KIND, "test-trivia"), None)
    assert "test-trivia" not in format_names()


def test_a_format_named_by_module_attr(tmp_path: Path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "x", "question": "Who?", "golden_answers": ["me"]}) + "\n")
    qs = load_questions(path, fmt="branchpoint.datasets.formats.flashrag:FLASHRAG")
    assert [q.id for q in qs] == ["x"]
    with pytest.raises(InputError, match="expected a QuestionFormat"):
        load_questions(path, fmt="branchpoint.datasets.formats.flashrag:Path")
