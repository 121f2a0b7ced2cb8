"""Question sets: the `Question` record, one registered format per file, loading and sampling.

- `questions`: `Question` and the embedded demo set's paths.
- `formats/`: the built-in formats (branchpoint, musique, hotpotqa, nq_open, flashrag,
  r1searcher, coconot, coconot_contrast, falseqa, selfaware, freshqa, generic), each with its
  loader and its own sniffing; `format`: `QuestionFormat` and `register_format`.
- `detect`: `detect_format` (`fmt="auto"`); `load`: `load_questions`, `load_questions_with_report`.
- `sampling`: `balanced_sample`. `builder` / `pairing_figure`: the benchmark builder (imported
  on their own: they need numpy and matplotlib).

Importing this package registers the built-in formats (kind ``question_format`` of
`branchpoint.registry`).
"""

from __future__ import annotations

import importlib

from branchpoint.datasets.detect import detect_format
from branchpoint.datasets.format import (
    FileHead,
    QuestionFormat,
    all_formats,
    format_names,
    get_format,
    register_format,
)
from branchpoint.datasets.formats import BUILTIN_FORMATS
from branchpoint.datasets.load import (
    CATEGORY_FILTERS,
    DEMO,
    LoadReport,
    load_questions,
    load_questions_with_report,
)
from branchpoint.datasets.questions import (
    UNANSWERABLE_CATEGORIES,
    Question,
    demo_corpus_path,
    demo_dir,
    demo_questions_path,
)
from branchpoint.datasets.sampling import balanced_sample

__all__ = [
    "CATEGORY_FILTERS",
    "DEMO",
    "UNANSWERABLE_CATEGORIES",
    "FileHead",
    "LoadReport",
    "Question",
    "QuestionFormat",
    "all_formats",
    "balanced_sample",
    "demo_corpus_path",
    "demo_dir",
    "demo_questions_path",
    "detect_format",
    "format_names",
    "get_format",
    "load_questions",
    "load_questions_with_report",
    "register_format",
]

for _module in BUILTIN_FORMATS:  # registers each built-in format
    importlib.import_module(f"branchpoint.datasets.formats.{_module}")
