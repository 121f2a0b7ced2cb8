"""metrics.json and value.json through their models: written as before (same keys and values),
read back by `read_metrics` / `read_value`, and a bad or newer file refused by name and field."""

from __future__ import annotations

import json
import math

import pytest

from branchpoint.errors import InputError
from branchpoint.evaluation.metrics import compute_metrics, metrics_json
from branchpoint.evaluation.metrics_file import METRICS_SCHEMA_VERSION, MetricsReport, read_metrics
from branchpoint.evaluation.value.value_file import VALUE_SCHEMA_VERSION, ValueReport, read_value, value_file_text
from tests.evaluation.test_metrics import hand_set


def _metrics_file(tmp_path, records=None):
    path = tmp_path / "metrics.json"
    path.write_text(metrics_json(compute_metrics(records or hand_set(), "human")), encoding="utf-8")
    return path


def test_metrics_round_trip_keeps_every_key_and_infinity(tmp_path):
    fp = [r for r in hand_set() if r.category == "FP"]  # nothing correct: TPC = inf
    path = _metrics_file(tmp_path, fp)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema_version"] == METRICS_SCHEMA_VERSION and data["tpc"] == "inf"
    model = read_metrics(tmp_path)  # the run directory
    assert isinstance(model, MetricsReport) and math.isinf(model.tpc)
    assert json.loads(metrics_json(model)) == data  # read and written back: unchanged
    label = next(iter(model.by_condition))
    assert model.by_condition[label].by_category["FP"].n == data["by_condition"][label]["by_category"]["FP"]["n"]


def test_metrics_written_before_schema_version_read_as_version_1(tmp_path):
    path = _metrics_file(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["schema_version"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert read_metrics(path).n == data["n"]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda d: d.update(schema_version=99),
            r'metrics\.json: field "schema_version" is 99, newer than this branchpoint reads \(1\)',
        ),
        (lambda d: d.update(schema_version="1"), r'metrics\.json: field "schema_version" must be an integer'),
        (lambda d: d.pop("by_condition"), r'metrics\.json: field "by_condition" missing'),
        (
            lambda d: d["by_condition"][next(iter(d["by_condition"]))].update(n="many"),
            r'metrics\.json: field "by_condition\..+\.n" should be a valid integer.*many',
        ),
    ],
)
def test_bad_metrics_files_name_the_file_and_field(tmp_path, change, message):
    path = _metrics_file(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_metrics(path)


def test_missing_or_broken_metrics_file(tmp_path):
    with pytest.raises(InputError, match=r"metrics\.json: not found \(run `branchpoint evaluate"):
        read_metrics(tmp_path)
    (tmp_path / "metrics.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputError, match="expected a JSON object, got list"):
        read_metrics(tmp_path)


def _value_dict():
    return {
        "schema_version": VALUE_SCHEMA_VERSION,
        "source": "run/forks.jsonl",
        "settings": {"judge": "rule"},
        "states": {"test": 4, "dev": 0, "forked_states": 4},
        "forecasters": {"f": {"kind": "file"}},
        "skipped_forecasters": {},
        "brier": {"f": {"brier": 0.2, "level": 0.1, "gain": 0.05, "variance": 0.05}},
        "gain_risk": {"f": "inf"},
        "gain_r2": {"f": None},
        "theta": 0.25,
        "mean_gain": 0.1,
        "gain_variance": 0.24,
        "intervals": {"level": 0.95, "resamples": 0, "brier": {"f": None}},
        "utility": {"by_price": {"0": {"always_think": {"utility": 0.5, "search_rate": 0.0, "tau": 0.1}}}},
        "warnings": [],
    }


def test_value_round_trip_and_typed_access(tmp_path):
    data = _value_dict()
    path = tmp_path / "value.json"
    path.write_text(value_file_text(data), encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == data  # no key added or dropped
    model = read_value(tmp_path)
    assert isinstance(model, ValueReport)
    assert model.brier["f"].level == 0.1 and math.isinf(model.gain_risk["f"])
    assert model.utility.by_price["0"]["always_think"].utility == 0.5
    assert model.utility.by_price["0"]["always_think"].model_extra == {"tau": 0.1}  # extra keys kept
    assert json.loads(value_file_text(model)) == data


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("schema_version"), r'value\.json: field "schema_version" missing'),
        (lambda d: d.update(schema_version=2), r'value\.json: field "schema_version" is 2, newer'),
        (
            lambda d: d["brier"]["f"].update(level="low"),
            r'value\.json: field "brier\.f\.level" should be a valid integer or a valid number.*low',
        ),
        (lambda d: d.pop("states"), r'value\.json: field "states" missing'),
    ],
)
def test_bad_value_files_name_the_file_and_field(tmp_path, change, message):
    data = _value_dict()
    change(data)
    (tmp_path / "value.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=message):
        read_value(tmp_path)
