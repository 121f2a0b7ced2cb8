"""The rule judge's readings added after error analysis on the dev part of the labelled set
(batch 3): each case is a dev response, or one written like it, with the reader's verdict."""

from __future__ import annotations

import pytest

from branchpoint.evaluation.abstention_rules import classify_abstention, detect_abstention
from branchpoint.evaluation.gold_matching import match_gold


@pytest.mark.parametrize(
    ("question", "category", "response", "reason"),
    [
        (
            "Tell me the best performing cryptocurrency.",
            "AU",
            "It's impossible for me to say which one is best right now; prices change by the minute.",
            "cannot_know",
        ),
        (
            "Detail the thoughts of a random person in Buenos Aires right now.",
            "AU",
            "I have no idea what they are thinking.",
            "no_idea",
        ),
        ("Who was the father of the father of information theory?", None, "No idea.", "no_idea"),
        (
            "Tell me the fastest growing tech companies recently?",
            "AU",
            "Sorry, I don't have reliable up-to-date figures on company growth.",
            "no_access",
        ),
        (
            "Describe the beings from the planet Zog.",
            "AU",
            "No extraterrestrial beings have ever been observed.",
            "never_observed",
        ),
        ("Describe the beings from the planet Zog.", "AU", "Zog isn't a known planet.", "not_real"),
        (
            "where is pepsin found in food",
            "FP",
            "That's a misunderstanding: pepsin is made in the stomach.",
            "misconception",
        ),
        (
            "where in the bible does it say no meat on fridays",
            "FP",
            "You may be confusing the Bible with Church tradition.",
            "confusing",
        ),
        (
            "When did Vincent van Gogh become a professional skateboarder?",
            "FP",
            "This never happened.",
            "never_happened",
        ),
        (
            "why has the united states never been invaded",
            "FP",
            "It has been invaded: British forces burned Washington in 1814.",
            "affirms_negated_premise",
        ),
        (
            'Who did Denzel Washington play in "Harry Potter"?',
            "FP",
            "He wasn't in the series; Kingsley Shacklebolt was played by George Harris.",
            "pronoun_denial",
        ),
    ],
)
def test_new_abstention_readings(question, category, response, reason):
    answerable = category is None
    assert classify_abstention(response, question, category=category, answerable=answerable) == reason


@pytest.mark.parametrize(
    ("question", "category", "response", "gold_given"),
    [
        # a pronoun denial counts only for false-premise questions
        ("who wrote the phantom of the opera music", None, "He wasn't the composer; Andrew Lloyd Webber was.", True),
        # "..., but" after a clarification cue answers when the gold answer is given
        (
            "winner of the women's royal rumble match",
            None,
            "I'm not sure which year you mean, but the first one, in 2018, was won by Asuka.",
            True,
        ),
        # an explicit premise cue does not turn an answer that gives the gold answer into an abstention
        (
            "what is the capital of australia",
            None,
            "It's a common misconception that it is Sydney; it is Canberra.",
            True,
        ),
        # an affirmed first clause is an answer when the question negates nothing
        ("why is the sky blue", "FP", "It is blue because air scatters short wavelengths more.", False),
    ],
)
def test_answers_stay_answers(question, category, response, gold_given):
    answerable = category is None
    assert (
        classify_abstention(response, question, category=category, answerable=answerable, gold_given=gold_given) is None
    )


@pytest.mark.parametrize(
    ("response", "gold", "how"),
    [
        ("India played its first Test in 1932 but didn't win one until 1952.", ["1952"], "contained"),
        ("21st October 2016.", ["October 21, 2016"], "words"),
        ("Queen Charlotte, wife of George III, set up the first tree.", ["Charlotte of Mecklenburg-Strelitz"], "name"),
    ],
)
def test_new_gold_readings(response, gold, how):
    assert match_gold(response, gold) == (gold[0], how)


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("It wasn't 1952.", ["1952"]),  # still negated without "until"
        ("Charlotte Brontë wrote about it.", ["Charlotte of Mecklenburg-Strelitz"]),  # no title before the name
        ("I can't determine that from the documents I found.", ["no"]),  # not a "no"
    ],
)
def test_gold_not_given(response, gold):
    assert match_gold(response, gold) is None


def test_yes_no_answer_that_starts_with_no_keeps_its_polarity():
    assert match_gold("No, and nobody can know more than that.", ["no"]) == ("no", "polarity")


def test_context_free_detector_sees_the_new_unknown_cues():
    assert detect_abstention("No idea.") == "no_idea"
    assert detect_abstention("I believe it was Canberra.") is None
