"""The policy example on the docs page "Agents and policies" (docs/agents.md), copied exactly, is
the user policy the fork invariant test runs (from the spec's folder, through `run`, `fork` and
its forced answer in its own protocol)."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.experiments.test_fork_invariant import USER_POLICY

PAGE = REPO / "docs" / "agents.md"


def policy_example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Write your own policy", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/agents.md: no python block under 'Write your own policy'"
    return match.group(1)


def test_the_docs_policy_is_the_one_the_invariant_test_runs():
    assert policy_example().strip() == USER_POLICY.strip()
