"""docs/recipes.md maps every table and figure of both seed studies to a recipe. Its commands
run, as written, on the simulated model in tests/docs/test_pages_run.py (the shared-data ones
where ../shared/data is beside the repository)."""

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
    assert "issue 14" in text and "vLLM" in text
