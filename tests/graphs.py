"""Run the agent graph from a test: its nodes are coroutines, so through `ainvoke` on a loop."""

from __future__ import annotations

import asyncio
from typing import Any


def invoke(graph: Any, *args: Any, **kwargs: Any) -> Any:
    """`graph.ainvoke(*args, **kwargs)` run to completion on a new event loop."""
    return asyncio.run(graph.ainvoke(*args, **kwargs))
