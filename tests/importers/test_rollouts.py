"""`import rollouts`: Search-R1 and verl rollout dumps as traces, their numbers checked against an
independent reading of the dumps, the boundary over training, and forks from imported states.

The dumps are branchpoint/data/rollouts (written by tests/importers/make_rollouts.py from the
tools' own formats; see its docstring for the repository paths they follow)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.errors import InputError
from branchpoint.evaluation.judges import judge_records
from branchpoint.evaluation.metrics import MetricsConfig, tpc
from branchpoint.evaluation.training_boundary import training_boundary
from branchpoint.importers.rollout_import import import_rollout_files, load_rollouts
from branchpoint.traces import read_records
from tests.importers import make_rollouts

DATA = Path(__file__).resolve().parents[2] / "branchpoint" / "data" / "rollouts"
SR1 = [DATA / f"searchr1_step{s}.jsonl" for s in (10, 50, 100)]
runner = CliRunner()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_the_shipped_examples_are_what_the_generator_writes(tmp_path):
    for written in make_rollouts.write(tmp_path):
        assert written.read_bytes() == (DATA / written.name).read_bytes(), written.name


def test_searchr1_rollouts_match_an_independent_reading_of_the_sequences(tmp_path):
    out = tmp_path / "sr1.jsonl"
    import_rollout_files([SR1[0]], "searchr1", out)
    records = read_records(out)  # the trace contract validates every line
    raw = lines(SR1[0])
    assert len(records) == len(raw)
    for rec, obj in zip(records, raw):
        seq = obj["sequences_str"]
        response = seq.split("<|im_start|>assistant\n", 1)[1]
        # independent: Search-R1's own counts, read off the string with its tags
        assert rec.search_calls == response.count("<information>")
        # the model's last <answer> in the response (not qa_em.extract_solution's last match in the
        # whole sequence: the prompt's "<answer> and </answer> ... <answer> Beijing </answer>" and
        # the invalid-action message's tags would be taken for answers where the model gave none)
        answers = re.findall(r"<answer>(.*?)</answer>", response.replace(make_rollouts.SR1_INVALID, ""), re.DOTALL)
        assert rec.final_answer == (answers[-1].strip() if answers else None)
        assert rec.gold_answers == obj["reward_model"]["ground_truth"]["target"]
        assert rec.condition == {"rollout.step": 10}
        assert rec.question in seq
        label = next(j.label for j in rec.judgments if j.judge == "searchr1:score")
        assert label == ("CORRECT" if obj["score"] >= 1 else "INCORRECT")
        # estimated counts: ceil(chars / 4) of every generated turn; the turns are the response
        # minus what the environment appended
        generated = response.removesuffix("<|im_end|>")
        for block in re.findall(r"\n\n<information>.*?</information>\n\n", generated, re.DOTALL):
            generated = generated.replace(block, "\x00", 1)
        generated = generated.replace(make_rollouts.SR1_INVALID, "\x00")
        assert rec.output_tokens == sum(math.ceil(len(t) / 4) for t in generated.split("\x00") if t)
        assert rec.model_extra["token_counts"] == "estimated"
    # the rollout with an invalid action and no answer is malformed, scored as wrong
    bad = [r for r in records if r.status == "malformed"]
    assert len(bad) == 1 and bad[0].steps[0].action == "invalid"


def test_passages_are_parsed_from_the_information_block():
    [(rec, _)] = [x for x in load_rollouts([SR1[2]], "searchr1") if x[0].search_calls == 2][:1]
    search = next(s for s in rec.steps if s.kind == "search")
    assert [d.title for d in search.retrieved] == ["Frankenstein", "Mary Shelley"]
    assert search.retrieved[0].text == make_rollouts.CORPUS["frankenstein"].split("\n", 1)[1]


def test_verl_rollout_dump_and_agent_loop_outputs(tmp_path):
    dump = load_rollouts([DATA / "verl_step100.jsonl"], "verl")
    loop = load_rollouts([DATA / "verl_agent_loop.jsonl"], "verl", tokenizer=DATA / "tokenizer.json")
    raw = lines(DATA / "verl_agent_loop.jsonl")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(DATA / "tokenizer.json"))
    for (d, _), (r, _), obj in zip(dump, loop, raw):
        # the same rollouts, one dumped as text, one as ids: same searches, answers, questions
        assert (d.search_calls, d.final_answer, d.question_id) == (r.search_calls, r.final_answer, r.question_id)
        queries = [
            q
            for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", d.steps[0].raw or "")
            for q in json.loads(c)["arguments"]["query_list"]
        ]
        if d.search_calls:
            assert d.steps[1].query == queries[0]
        # exact counts from the ids: generated = the mask's 1s; input = prompt + all before each call
        mask = obj["response_mask"]
        assert r.output_tokens == sum(mask)
        starts = [i for i, m in enumerate(mask) if m == 1 and (i == 0 or mask[i - 1] == 0)]
        assert r.input_tokens == sum(len(obj["prompt_ids"]) + i for i in starts)
        assert r.model_extra["token_counts"] == "ids"
        assert r.condition == {"rollout.step": 100}
    # a text dump counted with the same tokenizer: each turn's own tokens
    counted = load_rollouts([DATA / "verl_step100.jsonl"], "verl", tokenizer=DATA / "tokenizer.json")
    for c, _ in counted:
        assert c.model_extra["token_counts"] == "tokenizer:tokenizer.json"
        turns = [s.raw for s in c.steps if s.usage is not None]
        assert c.output_tokens == sum(len(tok.encode(t, add_special_tokens=False).ids) for t in turns)


def test_agent_loop_ids_without_a_tokenizer_are_a_clear_error():
    with pytest.raises(InputError, match=r"verl_agent_loop.jsonl line 1: .*--tokenizer"):
        load_rollouts([DATA / "verl_agent_loop.jsonl"], "verl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"foo": 1}, 'expected field "sequences_str"'),
        ({"sequences_str": "no prompt here"}, 'no "Question: "'),
        ({"input": "Question: q?\n", "output": "<answer>a</answer>", "score": "high"}, 'field "score"'),
        ({"input": "Question: q?\n", "output": "<answer>a</answer>", "step": 1.5}, 'field "step"'),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"input": "Question: q?\n", "output": "<answer>a</answer>"}) + "\n" + json.dumps(line) + "\n"
    )
    with pytest.raises(InputError, match=rf"bad.jsonl line 2: .*{re.escape(message)}"):
        load_rollouts([path], "searchr1")


def test_imported_traces_evaluate_with_their_rewards_and_tpc(tmp_path):
    out = tmp_path / "sr1.jsonl"
    result = runner.invoke(app, ["import", "rollouts", *map(str, SR1), "--format", "searchr1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "token counts of 36 estimated" in result.output
    result = runner.invoke(app, ["evaluate", str(out), "--judge", "given", "--no-progress", "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    records = read_records(out)
    for step in (10, 50, 100):
        mine = [r for r in records if r.condition == {"rollout.step": step}]
        scores = {
            (o["extra_info"]["index"], i): o["score"] for i, o in enumerate(lines(DATA / f"searchr1_step{step}.jsonl"))
        }
        cost = sum(r.output_tokens + 0.25 * r.input_tokens + 500 * r.search_calls for r in mine)
        expected_tpc = cost / sum(scores.values())
        cond = metrics["by_condition"][f"rollout.step={step}"]
        assert cond["tpc"] == pytest.approx(expected_tpc)
        assert tpc(judge_records(mine, "given"), "given", MetricsConfig()) == pytest.approx(expected_tpc)


def boundary_by_hand(records, judge):
    """The boundary statistics computed directly from the definitions, per step."""
    out = {}
    for step in sorted({r.model_extra["training_step"] for r in records}):
        rs = [r for r in records if r.model_extra["training_step"] == step]
        correct = {r.execution_id: any(j.label == "CORRECT" for j in r.judgments if j.judge == judge) for r in rs}
        qs = {r.question_id for r in rs}
        easy = {r.question_id for r in rs if r.search_calls == 0 and correct[r.execution_id]}
        searched = [r for r in rs if r.search_calls > 0]
        out[step] = {
            "answerable_without_search": len(easy) / len(qs),
            "redundant_search_share": (sum(r.question_id in easy for r in searched) / len(searched))
            if searched
            else None,
            "search_rate": len(searched) / len(rs),
        }
    return out


def test_the_boundary_over_training_matches_its_definitions(tmp_path):
    records = judge_records([r for r, _ in load_rollouts(SR1, "searchr1")], "given")
    report = training_boundary(records, "given", MetricsConfig(bootstrap=200))
    expected = boundary_by_hand(records, "given")
    assert [s["step"] for s in report["steps"]] == [10, 50, 100]
    for s in report["steps"]:
        for key, value in expected[s["step"]].items():
            assert s[key] == pytest.approx(value), (s["step"], key)
        lo, hi = s["answerable_without_search_ci"]
        assert lo <= s["answerable_without_search"] <= hi
    # the hand-built trend: the policy learns to search what it knew
    shares = [s["answerable_without_search"] for s in report["steps"]]
    assert shares == sorted(shares, reverse=True) and shares[0] > shares[-1]


def test_the_boundary_intervals_resample_questions_not_rollouts():
    records = judge_records([r for r, _ in load_rollouts([SR1[0]], "searchr1")], "given")
    doubled = records + [
        r.model_copy(update={"execution_id": r.execution_id + "x", "repeat": r.repeat + 2}) for r in records
    ]
    a = training_boundary(records, "given", MetricsConfig(bootstrap=300))["steps"][0]
    b = training_boundary(doubled, "given", MetricsConfig(bootstrap=300))["steps"][0]
    # every question's rollouts duplicated: same questions, so the same clustered intervals
    assert a["search_rate_ci"] == b["search_rate_ci"]


def test_training_boundary_command_writes_the_report_and_figure(tmp_path):
    out = tmp_path / "sr1.jsonl"
    import_rollout_files(SR1, "searchr1", out)
    result = runner.invoke(app, ["training-boundary", str(out), "--out", str(tmp_path / "b"), "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "b" / "training_boundary.json").read_text())
    assert [s["step"] for s in report["steps"]] == [10, 50, 100]
    for ext in ("png", "svg", "csv"):
        assert (tmp_path / "b" / "figures" / f"training_boundary.{ext}").stat().st_size > 0
    csv_rows = (tmp_path / "b" / "figures" / "training_boundary.csv").read_text().splitlines()
    assert len(csv_rows) == 4


def test_step_option_sets_each_files_step(tmp_path):
    records = [r for r, _ in load_rollouts(SR1[:2], "searchr1", steps=[1, 2])]
    assert {r.condition["rollout.step"] for r in records} == {1, 2}
    result = runner.invoke(
        app,
        [
            "import",
            "rollouts",
            str(SR1[0]),
            "--format",
            "searchr1",
            "--out",
            str(tmp_path / "x.jsonl"),
            "--step",
            "1",
            "--step",
            "2",
        ],
    )
    assert result.exit_code == 2 and "--step: 2 given for 1 files" in result.output


def test_verl_rollouts_cannot_be_forked_and_say_why(tmp_path):
    result = runner.invoke(
        app,
        [
            "import",
            "rollouts",
            str(DATA / "verl_step10.jsonl"),
            "--format",
            "verl",
            "--out",
            str(tmp_path / "r" / "executions.jsonl"),
            "--spec",
            "x.yaml",
        ],
    )
    assert result.exit_code == 2 and "verl rollouts cannot be forked" in result.output


def fork_spec(tmp_path: Path, base_url: str) -> Path:
    data = {
        "name": "rl-step100",
        "questions": {"path": "demo"},
        "model": {"provider": "openai", "base_url": base_url, "name": "m", "style": "chat", "max_tokens": 32},
        "agent": {"policy": "tagged", "protocol": "searchr1", "search_cap": 4, "top_k": 2},
        "retrieval": {"default": "demo", "sources": {"demo": {"corpus": "demo"}}},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_searchr1_rollouts_fork_from_their_rebuilt_states(tmp_path, isolated_cache):
    from branchpoint.experiments.forking import ForkPlan, fork_run
    from branchpoint.experiments.verify import verify_run
    from tests.servers.agent_server import agent_server

    with agent_server() as server:
        run_dir = tmp_path / "run"
        out = run_dir / "executions.jsonl"
        import_rollout_files([SR1[2]], "searchr1", out, spec=fork_spec(tmp_path, server.base_url))
        report = verify_run(run_dir, sample=0)
        assert not report.problems, report.problems
        records = read_records(out)
        parsed = {r.execution_id: p for r, p in zip(records, [p for _, p in load_rollouts([SR1[2]], "searchr1")])}
        two = next(r for r in records if r.search_calls == 2)
        assert len(two.checkpoint_ids) == 5  # initial, pending 1, after 1, pending 2, after 2
        server.clear()
        fork_run(
            run_dir,
            ForkPlan(actions=["THINK"], boundaries=["after_search_k"], repeats=1, executions=[two.execution_id[:12]]),
            progress=False,
        )
        bodies = [b for p, b in server.requests if p.endswith("/chat/completions")]
        assert len(bodies) == 2
        # the branch's first request is the rollout's own sequence up to the k-th <information>
        # block, continued from an opened <answer> (the forced answer of the protocol)
        response = parsed[two.execution_id].prompt
        seq = lines(SR1[2])[[r.execution_id for r in records].index(two.execution_id)]["sequences_str"]
        response = seq.split("<|im_start|>assistant\n", 1)[1]
        ends = [m.end() for m in re.finditer(r"</information>\n\n", response)]
        sent = sorted(b["messages"][-1]["content"] for b in bodies)
        assert sent == sorted(response[:e] + "<answer>" for e in ends)
        assert all(b["messages"][0]["content"] in seq for b in bodies)
