"""docs/recipes.md maps every table and figure of both seed studies to a recipe. Its commands
run, as written, on the simulated model in tests/docs/test_pages_run.py (those reading the
public files of docs/data.md where a copy of them is present)."""

from __future__ import annotations

from tests.conftest import REPO

PAGE = REPO / "docs" / "recipes.md"


def test_the_page_maps_every_table_and_figure_of_both_studies():
    text = PAGE.read_text()
    for item in [*(f"Table {i}" for i in range(2, 11)), *(f"Figure {i}" for i in (1, 2, 3, 4, 5, 6, 8, 9))]:
        assert item in text.split("## Search-value study")[0], f"over-searching study: {item}"
    value_part = text.split("## Search-value study")[1]
    for item in ["Table 1", *(f"Figure {i}" for i in range(1, 9))]:
        assert item in value_part, f"search-value study: {item}"
    ways = text.split("## Three ways to run a recipe")[1].split("\n## ")[0]
    for model, setting in [("embedded", "gemma-3-270m"), ("simulated", "--set model.provider=sim"), ("vLLM", "openai")]:
        row = next((line for line in ways.splitlines() if line.startswith(f"| {model} ")), "")
        assert setting in row, f"the {model} row of 'Three ways to run a recipe' lacks {setting!r}: {row!r}"


def test_every_spec_a_recipe_runs_needs_only_the_packaged_data():
    """The recipes' specs read the packaged demo set (or files a recipe makes), never public data
    a newcomer would first have to fetch."""
    import re

    for spec in sorted(set(re.findall(r"experiments/[\w.-]+\.yaml", PAGE.read_text()))):
        text = (REPO / spec).read_text()
        paths = re.findall(r"(?:corpus|path|index):\s*([^\s,}]+)", text)
        assert all(p == "demo" for p in paths), f"{spec} reads {paths}"
