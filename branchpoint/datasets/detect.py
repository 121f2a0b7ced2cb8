"""`fmt="auto"`: which registered question format a file is in.

File-name rules first (each format's `by_name`, in `name_rank` order), then content rules (each
format's `sniff`, in `sniff_rank` order); the first rule that says yes names the format. For the
built-in formats that is: the file name ("coconot_contrast", "coconot", "nq_open"; "musique" /
"hotpot" / "selfaware" only for ``.json`` files, since R1-Searcher ships ``musique_500.jsonl``;
"falseqa" / "freshqa" only for ``.csv`` files), then the content: a ``.csv`` file by its header
columns, a ``.json`` object by its ``"example"`` list, otherwise by the keys of the first record
(``answerable`` with an ``id`` and only `Question` fields -> ``branchpoint``, ``answerable``
otherwise -> ``generic``). The contrast set cannot be told from CoCoNot by its keys: a renamed
contrast file needs ``fmt="coconot_contrast"``.
"""

from __future__ import annotations

from pathlib import Path

from branchpoint.datasets.format import FileHead, all_formats, format_names
from branchpoint.datasets.reading import check_file, fmt_keys
from branchpoint.errors import InputError


def _undecidable(path: Path, why: str) -> InputError:
    return InputError(f"{path}: cannot tell the question format ({why}); pass fmt= one of {', '.join(format_names())}")


def detect_format(path: str | Path) -> str:
    """The format `load_questions(fmt="auto")` would use for this file."""
    path = Path(path)
    check_file(path)
    head = FileHead(path)
    formats = all_formats()
    for fmt in sorted((f for f in formats if f.by_name is not None), key=lambda f: f.name_rank):
        if fmt.by_name(head):  # type: ignore[misc]
            return fmt.name
    for fmt in sorted((f for f in formats if f.sniff is not None), key=lambda f: f.sniff_rank):
        if fmt.sniff(head):  # type: ignore[misc]
            return fmt.name
    if head.is_csv:
        raise _undecidable(path, f"csv header has columns {fmt_keys(c for c in head.csv_columns if c)}")
    raise _undecidable(path, f"first record has keys {fmt_keys(sorted(head.keys))}")
