"""The executor choice of `branchpoint run`: options that do not go together fail before anything runs."""

from __future__ import annotations

import pytest

from branchpoint.errors import InputError
from branchpoint.experiments.executors import check_executor_options


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("dask", None, 1, False), "--executor: expected local or ray"),
        (("local", "auto", 1, False), "--ray-address applies to --executor ray only"),
        (("ray", None, 2, False), "--processes applies to --executor local only"),
        (("local", None, 2, True), "--log-requests applies to a single local process"),
        (("ray", None, 1, True), "--log-requests applies to a single local process"),
    ],
)
def test_options_that_do_not_go_together(options, message):
    with pytest.raises(InputError, match=message):
        check_executor_options(*options)


@pytest.mark.parametrize("options", [("local", None, 1, True), ("local", None, 4, False), ("ray", "auto", 1, False)])
def test_options_that_go_together(options):
    check_executor_options(*options)
