"""The README's policy example, copied exactly, is the user policy the fork invariant test runs
(from the spec's folder, through `run`, `fork` and its forced answer in its own protocol)."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.experiments.test_fork_invariant import USER_POLICY


def readme_policy_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### Write your own policy", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README: no python block under 'Write your own policy'"
    return match.group(1)


def test_readme_policy_is_the_one_the_invariant_test_runs():
    assert readme_policy_example().strip() == USER_POLICY.strip()
