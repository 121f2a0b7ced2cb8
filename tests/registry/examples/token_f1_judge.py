"""Add a judge with settings: a factory registered with its settings model (then
`evaluation: {judge: token-f1, threshold: 0.8}` in a spec, or `branchpoint evaluate RUN
--judge token-f1 --judge-arg threshold=0.8`; a setting it does not take is refused by name)."""

from collections import Counter
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from branchpoint.api import JudgeRun, Judgment, judge, normalize_answer, rule_judge


class TokenF1Settings(BaseModel):
    """What the judge takes: the token F1 an answer needs against its best gold answer."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(0.5, ge=0.0, le=1.0, description="Least token F1 that counts as CORRECT.")


def token_f1(answer: str, gold: str) -> float:
    """SQuAD token F1 between a normalised answer and a normalised gold answer."""
    a, g = normalize_answer(answer).split(), normalize_answer(gold).split()
    common = sum((Counter(a) & Counter(g)).values())
    return 0.0 if common == 0 else 2 * common / (len(a) + len(g))


@dataclass(frozen=True)
class TokenF1Judge:
    """Answers: CORRECT when the best token F1 against a gold answer reaches the threshold, else
    the rule judge's label (INCORRECT where that was CORRECT); abstentions: the rule judge's."""

    threshold: float
    name: str = "token-f1"

    def judge_many(self, records):
        out = []
        for record in records:
            judged = []
            for j in rule_judge(record):
                if j.kind == "answer" and record.status == "ok":
                    best = max((token_f1(record.final_answer or "", g) for g in record.gold_answers), default=0.0)
                    label = "CORRECT" if best >= self.threshold else ("INCORRECT" if j.label == "CORRECT" else j.label)
                    judged.append(Judgment(judge=self.name, kind="answer", label=label, raw=f"f1={best:.3f}"))
                elif j.kind == "abstention":
                    judged.append(j.model_copy(update={"judge": self.name}))
            out.append(judged)
        return out


@judge("token-f1", settings=TokenF1Settings)
def token_f1_judge(settings: TokenF1Settings, run: JudgeRun) -> TokenF1Judge:
    """The token-F1 judge at the threshold its settings give."""
    return TokenF1Judge(settings.threshold)
