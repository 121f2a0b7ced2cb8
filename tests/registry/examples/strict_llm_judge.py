"""Add a new LLM judge: a factory registered with its settings model, built from a model spec
(then `evaluation: {judge: llm-strict, model: {name: ..., base_url: ...}}` in a spec, or
`branchpoint evaluate RUN --judge llm-strict --judge-model M --judge-base-url URL`)."""

from branchpoint.api import ANSWER_LABELS, JudgePrompt, JudgeRun, LLMJudge, LLMJudgeSettings, build_llm_judge, judge

STRICT_ANSWER = JudgePrompt(
    kind="answer",
    version="answer-strict-v1",  # bump when the template changes: it keys the judgment cache
    labels=ANSWER_LABELS,
    template=(
        "Question: {question}\nGold answers: {gold_answers}\nResponse: {response}\n\n"
        "CORRECT only if the response states a gold answer and nothing else; a hedge is INCORRECT; "
        "no answer is NOT_ATTEMPTED.\nEnd with a final line LABEL: CORRECT, LABEL: INCORRECT or "
        "LABEL: NOT_ATTEMPTED"
    ),
)


@judge("llm-strict", settings=LLMJudgeSettings)
def strict_judge(settings: LLMJudgeSettings, run: JudgeRun) -> LLMJudge:
    """The `llm` judge with a stricter answer prompt, under its own name."""
    return build_llm_judge(
        settings,
        run,
        name=f"llm-strict:{settings.model.name}",
        prompts={"answer": STRICT_ANSWER},
    )
