from __future__ import annotations

import pytest

from branchpoint.errors import InputError
from branchpoint.tools import SEARCH_TOOL_SCHEMA, SearchTool
from tests.conftest import KeywordSource


def test_search_counts_calls_and_uses_top_k(keyword_source):
    tool = SearchTool({"mem": keyword_source}, "mem", top_k=2)
    result = tool.run("capital of Australia")
    assert result.source == "mem" and len(result.docs) == 2
    assert result.docs[0].doc_id == "d-canberra"
    assert result.latency_s >= 0
    tool.run("Mona Lisa", k=1)
    assert tool.calls == 2


def test_named_sources_are_picked_by_name():
    other = KeywordSource("noisy", {"n1": ("Noise", "capital of Australia is Sydney")})
    tool = SearchTool({"mem": KeywordSource(), "noisy": other}, "mem")
    assert tool.run("capital", source="noisy").docs[0].source == "noisy"
    with pytest.raises(InputError, match="unknown retrieval source 'wiki'"):
        tool.run("x", source="wiki")


def test_bad_configuration(keyword_source):
    with pytest.raises(InputError, match="retrieval.default"):
        SearchTool({"mem": keyword_source}, "other")
    with pytest.raises(InputError, match="top_k"):
        SearchTool({"mem": keyword_source}, "mem", top_k=0)


def test_tool_schema_is_an_openai_function():
    assert SEARCH_TOOL_SCHEMA["function"]["name"] == "search"
    assert SEARCH_TOOL_SCHEMA["function"]["parameters"]["required"] == ["query"]
