"""`branchpoint evaluate --judge llm --cache DIR`: a re-judge (another run folder, no judgment
cache of its own) sends no request the judge has sent before."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from branchpoint.cli import app
from branchpoint.traces import write_records
from tests.evaluation.builders import make_record
from tests.evaluation.fake_openai import CHAT, chat_body, fake_openai

runner = CliRunner()


def test_a_rejudge_in_another_folder_is_answered_by_the_response_cache(tmp_path):
    first = tmp_path / "a"
    first.mkdir()
    write_records(
        first / "executions.jsonl",
        [
            make_record("1", gold=["Canberra"], answer="Canberra"),
            make_record("2", gold=["Canberra"], answer="Sydney, I think"),
        ],
    )
    second = tmp_path / "b"
    shutil.copytree(first, second)
    with fake_openai() as server:
        server.reply("/v1/models", (200, {"object": "list", "data": [{"id": "judge-m", "owned_by": "vllm"}]}))
        server.reply("/version", (200, {"version": "0.11.0"}))
        server.reply(CHAT, (200, chat_body("LABEL: CORRECT")), (200, chat_body("LABEL: INCORRECT")))

        def judge(run):
            args = ["evaluate", str(run), "--judge", "llm", "--judge-model", "judge-m", "--judge-base-url"]
            args += [server.base_url, "--judge-concurrency", "1", "--bootstrap", "0", "--no-progress"]
            result = runner.invoke(app, [*args, "--cache", str(tmp_path / "responses")])
            assert result.exit_code == 0, result.output
            return result.output

        out = judge(first)
        assert "2 model calls" in out and "response cache" not in out
        assert len(server.bodies(CHAT)) == 2
        again = judge(second)  # its own judgment cache is empty: the judge asks, the cache answers
        assert "2 model calls" in again and "2 answered by the response cache" in again
        assert len(server.bodies(CHAT)) == 2
    assert (second / "judge_cache.sqlite").is_file()
    a, b = (json.loads((run / "metrics.json").read_text()) for run in (first, second))
    assert a["answer_accuracy"] == b["answer_accuracy"] == 0.5
