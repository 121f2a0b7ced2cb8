"""Writes tests/importers/data/inspect_mockllm.eval and inspect_graded.eval with inspect_ai itself
(its mockllm model, offline).

    .venv/bin/python tests/importers/make_inspect_log.py

Three samples, run one at a time so mockllm's scripted outputs go to them in order:
- q1 (answerable): a `search` tool call, then the right answer;
- q2 (answerable): answers at once, wrongly;
- q3 (unanswerable, metadata answerable: false, category FP): a `calculator` call (not a search
  tool: an unknown step kind for branchpoint), then an abstention.
Usage is set on every output (mockllm would otherwise count tokens with tiktoken, which fetches
its vocabulary from the network).

inspect_graded.eval: the same task scored by two scorers, `includes` and `model_graded_qa`, the
grader a second mockllm model bound to the `grader` role (inspect's default for model-graded
scorers), so the grader's calls are model events of the log (inside the scorer's span, role
`grader`): 100 input and 10 output tokens each, grades C, I, C.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes, model_graded_qa
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool

OUT = Path(__file__).parent / "data" / "inspect_mockllm.eval"
GRADED = Path(__file__).parent / "data" / "inspect_graded.eval"


@tool
def search():
    async def execute(query: str) -> str:
        """Search the corpus.

        Args:
            query: what to search for
        """
        return '"Canberra"\nCanberra is the capital city of Australia.'

    return execute


@tool
def calculator():
    async def execute(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: the expression
        """
        return "42"

    return execute


def output(
    usage: tuple[int, int, int | None],
    *,
    content: str | None = None,
    tool_name: str | None = None,
    arguments: dict | None = None,
) -> ModelOutput:
    if tool_name:
        out = ModelOutput.for_tool_call(model="mockllm/model", tool_name=tool_name, tool_arguments=arguments or {})
    else:
        out = ModelOutput.from_content(model="mockllm/model", content=content or "")
    out.usage = ModelUsage(
        input_tokens=usage[0], output_tokens=usage[1], total_tokens=usage[0] + usage[1], reasoning_tokens=usage[2]
    )
    return out


def agent_outputs() -> list[ModelOutput]:
    """The evaluated model's outputs, in the order the three samples ask for them."""
    return [
        output((50, 12, 5), tool_name="search", arguments={"query": "capital of Australia"}),
        output((80, 3, None), content="Canberra"),
        output((40, 4, None), content="Leonardo da Vinci"),
        output((60, 10, None), tool_name="calculator", arguments={"expression": "6*7"}),
        output((90, 8, 2), content="I don't know: the question rests on a false premise."),
    ]


def dataset() -> list[Sample]:
    return [
        Sample(id="q1", input="What is the capital of Australia?", target="Canberra"),
        Sample(id="q2", input="Who painted The Starry Night?", target="Vincent van Gogh"),
        Sample(
            id="q3",
            input="In which year did Canberra host the 1956 Olympics?",
            target="I don't know",
            metadata={"answerable": False, "category": "FP"},
        ),
    ]


def write_log(scorers: list, out: Path, model_roles: dict | None = None) -> None:
    task = Task(dataset=dataset(), solver=[use_tools(search(), calculator()), generate()], scorer=scorers)
    with tempfile.TemporaryDirectory() as tmp:
        logs = eval(
            task,
            model=get_model("mockllm/model", custom_outputs=agent_outputs()),
            model_roles=model_roles,
            log_dir=tmp,
            display="none",
            max_samples=1,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(logs[0].location, out)
    print(f"wrote {out}")


def main() -> None:
    write_log([includes()], OUT)
    grades = [output((100, 10, None), content=f"The answer is judged.\nGRADE: {g}") for g in "CIC"]
    grader = get_model("mockllm/model", custom_outputs=grades, memoize=False)
    write_log([includes(), model_graded_qa()], GRADED, model_roles={"grader": grader})


if __name__ == "__main__":
    main()
