"""The built-in question formats, one module each; importing a module registers its format.

`branchpoint.datasets` imports them all (the registry's built-in modules for kind
``question_format``). A new format is one module like these: a parser, its file-name and content
rules, and a `register_format(QuestionFormat(...))` call (or a plug-in that makes that call).
"""

BUILTIN_FORMATS = (
    "branchpoint_jsonl",
    "musique",
    "hotpotqa",
    "nq_open",
    "flashrag",
    "r1searcher",
    "coconot",
    "coconot_contrast",
    "falseqa",
    "selfaware",
    "freshqa",
    "generic",
)
"""Modules of the built-in formats (in the order the docs describe them)."""
