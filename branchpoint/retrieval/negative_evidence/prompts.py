"""Prompts that ask a model for one negative-evidence document, and parsing of its reply."""

from __future__ import annotations

import re

from branchpoint.retrieval.negative_evidence.documents import (
    MAX_WORDS,
    MIN_WORDS,
    Angle,
)

_CHAT_SYSTEM = "You write short, neutral entries for a reference encyclopedia."


_CHAT_USER = """\
Write a short encyclopedic document (about 100 words) explaining why the information needed to \
answer the question below is unavailable or cannot be determined. Focus on this angle: \
{angle} ({guidance}).

Write in a neutral, factual, encyclopedic register about the topic of the question. Do not \
answer the question and do not invent a specific answer.

Question: {question}

Reply in exactly this format, with nothing before or after:
Title: <a short title naming the topic>
<one paragraph of about 100 words>"""


_REMINDER = (
    "Your previous reply could not be used. Start with a line `Title: <title>`, then one paragraph of about 100 words."
)


_COMPLETION_HEADER = """\
Encyclopedia entries of about 100 words, each explaining why the answer to a question is \
unavailable or cannot be determined, from the stated angle. Each entry is a `Title:` line \
followed by one paragraph.

Question: How many people attended the first performance of Shakespeare's Hamlet?
Angle: absence of historical records
Title: Attendance at early performances of Hamlet
No record of the audience at the first performance of Hamlet is known to survive. The play was \
probably first staged by the Lord Chamberlain's Men around 1600 or 1601, but theatre companies \
of the period kept no systematic box-office ledgers, and the surviving accounts of Philip \
Henslowe concern a rival company. Even the date and venue of the premiere are uncertain. \
Estimates of Elizabethan theatre capacity, up to about 3,000 for the Globe, describe what a \
playhouse could hold rather than who attended a given performance, so the size of the first \
audience cannot be determined from the historical record.
"""


#: The example entries the prompts show (a generated document must not copy them: `checks`).
EXAMPLE_TEXTS: tuple[str, ...] = (_COMPLETION_HEADER.split("Title: ", 1)[1].split("\n", 1)[1],)


_COMPLETION_ITEM = "\nQuestion: {question}\nAngle: {angle}\nTitle:"


def chat_messages(question: str, angle: Angle, retry: bool = False) -> list[dict[str, str]]:
    """The chat prompt for one (question, angle); `retry` adds a format reminder."""
    user = _CHAT_USER.format(angle=angle.name, guidance=angle.guidance, question=question.strip())
    if retry:
        user = f"{user}\n\n{_REMINDER}"
    return [{"role": "system", "content": _CHAT_SYSTEM}, {"role": "user", "content": user}]


def completion_prompt(question: str, angle: Angle, retry: bool = False) -> str:
    """The few-shot completion prompt for one (question, angle); it ends with `Title:`."""
    header = _COMPLETION_HEADER
    if retry:
        header = header.replace(
            "followed by one paragraph.", "followed by one paragraph of about 100 words, on the lines after the title."
        )
    return header + _COMPLETION_ITEM.format(question=question.strip(), angle=angle.name)


_TITLE_LINE = re.compile(r"^[\s#*_>`\"'-]*title[*_\s]*[:：][*_\s]*(?P<title>.*)$", re.IGNORECASE)


_BODY_LABEL = re.compile(r"^[*_\s]*(?:text|document|body|content|entry|paragraph)[*_\s]*[:：][*_]*\s*", re.IGNORECASE)


_NEXT_ITEM = re.compile(r"\s(?:Question|Angle|Title)\s*:", re.IGNORECASE)


def _clean_title(raw: str) -> str:
    title = raw.strip().strip("*_#`").strip()
    if len(title) >= 2 and title[0] == title[-1] and title[0] in "\"'":
        title = title[1:-1].strip()
    return " ".join(title.split())


def _trim(words: list[str], most: int) -> str:
    """At most `most` words, ending at a sentence end when one leaves at least MIN_WORDS."""
    kept = words[:most]
    for end in range(len(kept), MIN_WORDS - 1, -1):
        if kept[end - 1].endswith((".", "!", "?")):
            return " ".join(kept[:end])
    return " ".join(kept)


def parse_generated(reply: str, min_words: int = MIN_WORDS, max_words: int = MAX_WORDS) -> tuple[str, str] | None:
    """(title, text) from a model reply `Title: ...` + text, or None if it is not usable.

    Tolerates markdown (`**Title:**`, `# Title: ...`), code fences, a title alone on the line
    after `Title:`, a `Text:` label, and a model that goes on to write another entry (cut at the
    next `Question:` / `Title:`). Rejects replies without a title line, titles over 20 words or 150
    characters, and texts under `min_words` words; texts over `max_words` are cut at a sentence end.
    """
    lines = [ln for ln in reply.replace("\r\n", "\n").split("\n") if not ln.strip().startswith("```")]
    for i, line in enumerate(lines):  # noqa: B007 (i is read after the loop)
        match = _TITLE_LINE.match(line)
        if match:
            break
    else:
        return None
    title, body = _clean_title(match.group("title")), lines[i + 1 :]
    if not title:  # "Title:" alone, the title on the next non-empty line
        rest = [ln for ln in body if ln.strip()]
        if not rest:
            return None
        title, body = _clean_title(rest[0]), body[body.index(rest[0]) + 1 :]
    text = " ".join(" ".join(ln.split()) for ln in body if ln.strip())
    text = _BODY_LABEL.sub("", text, count=1)
    cut = _NEXT_ITEM.search(f" {text}")
    if cut:
        text = f" {text}"[: cut.start()].strip()
    words = text.split()
    if not title or len(title.split()) > 20 or len(title) > 150 or len(words) < min_words:
        return None
    return title, _trim(words, max_words) if len(words) > max_words else text
