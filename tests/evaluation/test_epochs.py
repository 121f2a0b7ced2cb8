"""Epoch metrics on hand-computed cases: pass@k, pass^k, ICC(1) (balanced and unbalanced), and
the identical-conditions check compared epoch by epoch."""

from __future__ import annotations

import pytest

from branchpoint.evaluation.epochs import icc1, pass_at_k, pass_hat_k
from branchpoint.evaluation.sameness import identical_conditions
from branchpoint.traces import ExecutionRecord


def test_pass_at_k_and_pass_hat_k_by_hand():
    # n = 3 epochs, c = 1 correct: of the 3 pairs, 2 hold the correct one; none is all correct
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert pass_hat_k(3, 1, 2) == 0.0
    # c = 2: every pair holds a correct one; 1 of the 3 pairs is both correct
    assert pass_at_k(3, 2, 2) == 1.0
    assert pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)
    # k = 1 is the share correct; k = n is any / all
    assert pass_at_k(5, 2, 1) == pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    assert (pass_at_k(4, 1, 4), pass_hat_k(4, 3, 4), pass_hat_k(4, 4, 4)) == (1.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_icc1_by_hand():
    # balanced: means 1, 0, 1/3, grand 4/9; SSB = 14/9 (MSB 7/9), SSW = 2/3 (MSW 1/9); k0 = 3:
    # ICC = (7/9 - 1/9) / (7/9 + 2·1/9) = 2/3
    assert icc1([[1, 1, 1], [0, 0, 0], [1, 0, 0]]) == pytest.approx(2 / 3)
    # unbalanced: n = 2, 3, 3 (N 8), grand 1/2; SSB = 1.5 (MSB 0.75), SSW = 0.5 (MSW 0.1);
    # k0 = (8 - 22/8) / 2 = 2.625: ICC = 0.65 / (0.75 + 1.625·0.1)
    assert icc1([[1, 0], [0, 0, 0], [1, 1, 1]]) == pytest.approx(0.65 / 0.9125)
    # within-question variance only: MSB 0, MSW 1/3 (k0 = 2): ICC = -1/3 / (1/3) = -1
    assert icc1([[1, 0], [0, 1], [1, 0]]) == pytest.approx(-1.0)
    # undefined: no variance at all, a single question, no replicate
    assert icc1([[1, 1], [1, 1]]) is None
    assert icc1([[1, 0, 1]]) is None
    assert icc1([[1], [0], [1]]) is None
    # counts (n_searches): means 2.5, 0.5, grand 1.5; MSB = 4, MSW = 1/2, k0 = 2: ICC = 3.5 / 4.5
    assert icc1([[2, 3], [0, 1]]) == pytest.approx(7 / 9)


def _rec(cond: str, qid: str, repeat: int, fingerprint: str) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id=f"{cond}-{qid}-{repeat}",
        run_id="r",
        condition={"agent.prompt": cond},
        question_id=qid,
        question="?",
        answerable=True,
        repeat=repeat,
        request_fingerprint=fingerprint,
    )


def test_identical_conditions_are_compared_epoch_by_epoch():
    # Two conditions that sent the same requests epoch by epoch, their records in different orders.
    a = [_rec("a", "q1", e, f"f{e}") for e in (0, 1, 2)]
    b = [_rec("b", "q1", e, f"f{e}") for e in (2, 1, 0)]
    groups = identical_conditions(a + b)
    assert [g["conditions"] for g in groups] == [["agent.prompt=a", "agent.prompt=b"]]
    assert groups[0]["questions"] == 1
    # one epoch that differs makes them different conditions
    c = [_rec("c", "q1", e, "other" if e == 1 else f"f{e}") for e in (0, 1, 2)]
    assert identical_conditions(a + c) == []
