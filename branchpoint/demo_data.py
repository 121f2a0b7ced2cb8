"""Where the embedded demo data lies (questions and corpus, written by this project).

A module of its own at the bottom of the layers: `datasets` loads the demo question set and
`retrieval` opens the demo corpus, and neither imports the other for it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def demo_dir() -> Path:
    """The folder of the embedded demo data written by this project (questions and corpus)."""
    return Path(str(files("branchpoint").joinpath("data", "demo")))


def demo_questions_path() -> Path:
    """The demo question set: answerable questions over the demo corpus and unanswerable ones."""
    return demo_dir() / "questions.jsonl"


def demo_corpus_path() -> Path:
    """The demo corpus (FlashRAG jsonl) that answers the demo set's answerable questions."""
    return demo_dir() / "corpus.jsonl"
