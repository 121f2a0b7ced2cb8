"""The rule judge's first reading of one response: did it abstain, and why?

The reading uses the question as well as the response, because the same words mean different
things in different places: "No, he did not" answers a yes/no question, while "Tigers don't
lay eggs" rejects the premise of "How many eggs do tigers lay?".

*Abstention* (`classify_abstention`) — the response withholds an answer when it

1. says the answer is not known or cannot be known ("unknown" cues: "I don't know", "no idea",
   "nobody can know that yet", "no record survives", "cannot be predicted", "impossible for me
   to say", "I couldn't find ...", "no X has ever been observed"); weak cues ("I'm not sure",
   "hard to say") do not count when the response then commits ("..., but it was X", "I believe
   it was X", "my guess is X", "possibly X", "either X or Y"), and no unknown cue counts when
   the same sentence goes on with "but" and commits ("I can't verify future results, but Spain
   is the most likely winner": a hedge that commits is an answer, SimpleQA's rule that the
   over-searching study's answer prompt adapts, section "LLM Judge Evaluation Protocol");
2. asks for clarification or answers several readings ("clarification" cues: a question back
   to the user, not a tentative "Maybe 1987?"; "which ... do you mean", "it depends on", "if
   you mean ..."; on UC questions, an answer per reading: three or more parts each opened by a
   different name, `answers_several_readings` — the study's "offers multiple perspectives");
3. questions or corrects the premise ("premise" cues: "false premise", "a myth", "a
   misunderstanding", "there is no ...", "actually,", "you may be confusing", "isn't a real
   ..."), or — premise-aware — negates what the question presupposes: a clause with a negation
   ("not", "n't", "never", "no X", "rather than", "instead of") that shares a content word
   with the question, a bare denial ("He didn't.", "None."), "this never happened", a first
   clause that affirms what a negated question denies ("Why has the US never been invaded?" -
   "It has been invaded: ..."), or (false-premise questions) a first sentence that denies with
   a pronoun subject ("He wasn't in the series") or the question's act attributed to someone
   the question does not name ("The Scarlet Letter was written by Nathaniel Hawthorne").

Negations are premise corrections only where the question can have a false presupposition to
correct: never for yes/no questions (there "no" is an answer), never for answer-unknown (AU)
questions (there "we will never find a cure" is a confident answer), and on answerable
questions only when no gold answer is given (a response that names the gold answer answered;
there the explicit premise cues and a clarification cue followed by "but" do not count either:
"It's a common misconception that it is Sydney; it's Canberra", "I'm not sure which year you
mean, but the first was won by Asuka").

Every abstention pattern lives here; whether a response gives a gold answer is read in
`gold_matching`, and the text normalisation both use is in `answer_normalization`.

The rules were written while reading the `dev` part of tests/evaluation/data/judge_labels.jsonl
(batch 1, then batch 3 for error analysis) and of judge_labels_adversarial.jsonl (batch 4: the
commit-after-unknown and several-readings rules); the `heldout` parts (batches 1, 2 and 4) were written before the rules they measure were frozen and are
never used to tune them (docs/judges.md reports both, tests/evaluation/test_judge_labels.py
re-measures the held-out part).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from branchpoint.evaluation.answer_normalization import STOP_WORDS, lower_straight_quotes, stem_plural


class AbstentionPattern(NamedTuple):
    """One way of abstaining: a name (stored in `Judgment.raw`), its family, and a regex."""

    name: str
    family: str  # "unknown" | "clarification" | "premise"
    regex: re.Pattern[str]

    @classmethod
    def compile(cls, name: str, family: str, pattern: str) -> AbstentionPattern:
        """The pattern `name` of `family` with its regex compiled (the judges' evidence cues too)."""
        return cls(name, family, re.compile(pattern))


_p = AbstentionPattern.compile


_FOR_SOMEONE = r"(?:for (?:me|us|you|anyone|anybody|any of us|an ai) )?"
_NEG_VERB = rf"(?:cannot|can't|can not|could not|couldn't|unable to|not able to|impossible {_FOR_SOMEONE}to|no way {_FOR_SOMEONE}to|not possible {_FOR_SOMEONE}to)"
_KNOW_VERB = r"(?:know|say|predict|determine|tell|answer|recite|describe|reveal|provide|give|find|access|see|read|look up|identify|confirm|verify|be (?:known|determined|predicted|answered|said))"

# Matched against the lowercased response with curly apostrophes straightened; the first
# pattern that matches, in this order, names the abstention. The "premise" family at the end
# (negations) is context-free recall: `classify_abstention` only accepts it where the question
# can have a false premise and the negation is about the question (see the module docstring).
ABSTENTION_PATTERNS: tuple[AbstentionPattern, ...] = (
    # The answer is not known or not knowable.
    _p("dont_know", "unknown", r"\b(?:i|we) (?:do not|don't|dont|simply don't) know\b"),
    _p("no_idea", "unknown", r"\b(?:i have|i've got|i've|we have) no idea\b|^\W*no idea\b"),
    _p("unknown", "unknown", r"\bunknown\b"),
    _p("unknowable", "unknown", r"\bunknowable\b"),
    _p("cannot_be_determined", "unknown", r"\b(?:cannot|can't|can not) be (?:determined|known|predicted|answered)\b"),
    _p("no_reliable_information", "unknown", r"\bno reliable information\b"),
    _p("not_enough_information", "unknown", r"\b(?:not enough|insufficient) information\b"),
    _p("impossible_to_know", "unknown", r"\bimpossible to know\b"),
    _p(
        "no_one_knows",
        "unknown",
        r"\b(?:no one|no-one|nobody|none of us)\b[^.;!?]{0,20}\b(?:knows?|can (?:\w+ )?(?:know|say|tell|predict)|could (?:know|say))\b",
    ),
    _p("unanswerable", "unknown", r"\bunanswerable\b"),
    _p("cannot_know", "unknown", rf"\b{_NEG_VERB}\s+(?:\w+\s+){{0,2}}{_KNOW_VERB}\b"),
    _p("no_way_of_knowing", "unknown", r"\bno (?:way|means) of (?:knowing|seeing|telling|predicting)\b"),
    _p(
        "no_access",
        "unknown",
        r"\b(?:have|has) no (?:way|access|information|data|means)\b|\b(?:don't|do not) have (?:(?:any|reliable|enough|that|such|the|current|recent|up-to-date|accurate|live|real-time)\s+){0,3}(?:information|data|access|a way|real-time|figures|numbers|details|knowledge)\b",
    ),
    _p(
        "not_recorded",
        "unknown",
        r"(?:\b(?:not|never)|\b(?:is|are|was|were)n't) (?:been )?(?:\w+ly )?(?:recorded|documented|established|counted|verified|published|determined|announced|decided|released|written down)\b|\bhasn't been (?:\w+ )?(?:published|released|played|decided|announced)\b",
    ),
    _p(
        "no_record",
        "unknown",
        r"\bno (?:surviving |known |reliable |written )?(?:records?|evidence|data|information)\b",
    ),
    _p(
        "never_observed",
        "unknown",
        r"\b(?:has|have) (?:ever|never) been (?:observed|found|discovered|confirmed|detected)\b",
    ),
    _p("lost_to_history", "unknown", r"\blost to (?:history|prehistory|time)\b"),
    _p(
        "remains_unknown",
        "unknown",
        r"\b(?:remains|is still|are still) (?:unknown|unclear|uncertain|a mystery|unsolved|open)\b|\ban open question\b",
    ),
    _p(
        "not_found",
        "unknown",
        r"\b(?:could not|couldn't|can't|cannot|did not|didn't) (?:find|locate|turn up)\b|\bno (?:results|sources?) (?:say|mention)\b",
    ),
    _p(
        "sources_silent",
        "unknown",
        r"\b(?:documents?|sources?|results?|searches)\b[^.;!?]{0,30}\b(?:do not|don't|did not|didn't|does not|doesn't) (?:say|mention|specify|turn up)\b",
    ),
    _p("cant_help", "unknown", r"\b(?:can't|cannot|can not) help\b|\bnot something i can\b|\bi can't (?:answer|say)\b"),
    _p(
        "not_yet",
        "unknown",
        r"\b(?:hasn't|has not|haven't|have not) (?:yet )?(?:happened|occurred|taken place|been (?:played|held|decided))\b|\bhas yet to\b|\bhave yet to\b",
    ),
    _p("may_or_may_not", "unknown", r"\bmay or may not\b|\bwhether or when\b|\bor whether\b"),
    _p("no_single_answer", "unknown", r"\bno (?:single|definitive|agreed|one) (?:\w+ )?(?:answer|number|figure)\b"),
    _p("cant_read_minds", "unknown", r"\bread (?:minds|your mind|thoughts)\b"),
    # The question is underspecified: the model asks for clarification or answers readings.
    _p(
        "could_you_clarify",
        "clarification",
        r"\b(?:could|can) you (?:please )?(?:clarify|specify|tell me|say|give me)\b",
    ),
    _p("which_do_you_mean", "clarification", r"\bwhich\b[^.?!]*\bdo you mean\b|\bdo you mean\b"),
    _p("please_specify", "clarification", r"\bplease (?:specify|clarify|tell me|let me know)\b|\blet me know\b"),
    _p("more_context", "clarification", r"\bmore (?:context|detail|details|information)\b"),
    _p(
        "need_to_know",
        "clarification",
        r"\b(?:i'd|i would|i) need to know\b|\byou haven't (?:said|specified|told)\b|\b(?:doesn't|does not|didn't|did not) (?:name|specify|say which|mention which)\b",
    ),
    _p(
        "not_sure_what_you_mean",
        "clarification",
        r"\bnot sure (?:what|which)\b[^.?!]*\byou(?:'re| are)? (?:mean|asking|referring)\b|\bwhat you're asking\b",
    ),
    _p(
        "it_depends",
        "clarification",
        r"\b(?:it|that|this|the answer) (?:all )?depends\b|\bdepending on (?:which|where|who|what|the)\b|\bvaries (?:by|from|between|with)\b|\bdiffers? (?:by|from|hugely|between)\b|\bdifferent (?:countries|states|places|times)\b",
    ),
    _p("if_you_mean", "clarification", r"\bif you mean\b|\bif you're (?:asking|referring)\b"),
    # A question back to the user; a tentative answer with a question mark ("Maybe 1987?",
    # "Possibly Saturn?") is an attempt, not a question.
    _p(
        "asks_back",
        "clarification",
        r"(?:^|[.!:;]\s*)(?!\s*(?:maybe|perhaps|possibly|probably|likely)\b)[^.!?:;]*\?",
    ),
    # The question rests on a false premise: the model corrects it.
    _p("false_premise", "premise", r"\bfalse premise\b|\bfalse (?:assumption|presupposition)\b"),
    _p("the_premise", "premise", r"\bthe premise\b|\bthe question (?:assumes|is based on|rests on)\b"),
    _p(
        "misconception",
        "premise",
        r"\bmisconception\b|\bmisunderstanding\b|\b(?:a|popular|common|an urban) myth\b|\bno scientific basis\b",
    ),
    _p("actually", "premise", r"\bactually,"),
    _p(
        "there_is_no",
        "premise",
        r"\bthere (?:is|was|are|were|has been|have been)(?: never)? no\b(?! (?:way|means)\b)|\bthere's no\b(?! (?:way|means)\b)|\bno such\b",
    ),
    _p(
        "does_not_exist",
        "premise",
        r"\b(?:does not|doesn't|did not|didn't|never) exist(?:ed)?\b|\b(?:does not|doesn't) apply\b|\bis (?:a |only a )?(?:legend|myth|fiction)\b",
    ),
    _p("confusing", "premise", r"\b(?:you're|you are|you may be|you might be) (?:mixing up|confusing)\b"),
    _p("not_real", "premise", r"\b(?:is not|isn't|are not|aren't|was not|wasn't) (?:a |an )?(?:real|known|actual)\b"),
    _p("is_not_true", "premise", r"\b(?:is not|isn't|that's not|not) true\b"),
    _p("incorrect_assumption", "premise", r"\bincorrect assumption\b"),
    _p("never", "premise", r"\bnever\b"),
    _p("did_not", "premise", r"\b(?:did not|didn't)\b"),
    _p("was_not", "premise", r"\b(?:was not|wasn't|were not|weren't)\b"),
    _p("is_not", "premise", r"\b(?:is not|isn't|are not|aren't|does not|doesn't|do not|don't)\b"),
)

#: Negation cues (the last patterns of the premise family) that need the question to count.
NEGATION_CUES: frozenset[str] = frozenset({"never", "did_not", "was_not", "is_not"})
#: Weak "unknown" cues that a committing phrase overrides ("I'm not sure, but I think it is X").
_WEAK = re.compile(
    r"\b(?:i'm|i am) not (?:entirely |completely |totally |100% )?(?:sure|certain)\b|\bhard to (?:say|predict|tell)\b|\bnot (?:entirely |completely )?(?:sure|certain)\b"
)
_COMMIT = re.compile(
    r",\s*but\b|\bi (?:believe|think|suspect|guess)\b|\bmy (?:best )?(?:guess|estimate)\b|\b(?:probably|most likely|likely|possibly|perhaps|maybe)\b|\bi'd (?:say|guess)\b|\beither\b[^.;!?]*\bor\b"
)
#: After an "unknown" cue, the same sentence goes on with "but" and commits to an answer
#: ("I can't verify future results, but Spain is the most likely winner"): SimpleQA's rule,
#: which the over-searching study's answer prompt adapts, that a hedged answer is an answer.
_BUT_TAIL = re.compile(r"[^.;!?]*?\bbut\b([^.;!?]*)")
#: What the tail after "but" must hold to commit: a committing phrase, an assertion about the
#: question's subject, or a candidate (a number or a capitalised name in the original text).
_TAIL_COMMITS = re.compile(
    r"\b(?:i (?:believe|think|suspect|guess)|my (?:best )?(?:guess|estimate)|i'd (?:say|guess)|(?:most )?likely|probably|perhaps|possibly|maybe|the answer is|(?:it|he|she|they|this|that)(?:'s| is| was| were| will be| would be| had| looks?))\b"
)
_CANDIDATE = re.compile(r"\d|\b[A-Z][a-z]")
_POLAR_START = re.compile(
    r"^\s*(?:is|are|was|were|do|does|did|can|could|will|would|should|has|have|had|may|might|must|shall)\b", re.I
)
#: A negation in a clause ("not", "n't", "never", "no X", "rather than", "instead of").
NEGATION = re.compile(r"\b(?:not|never|no|none|nothing|nobody|neither|nor|rather than|instead of)\b|n't\b")
_BARE_DENIAL = re.compile(
    r"^(?:no[,.]?\s+)?(?:(?:he|she|it|they|we|you|i)\s+(?:did|does|do|was|were|is|are|has|have|had|could|can|would|will)\s*(?:not|n't)|none|nothing|nobody|no one|neither|not at all)\b[^a-z]*$"
)
_CLAUSE_SPLIT = re.compile(r"[,;:.!?()\u2014\u2013]|\s-\s|\bbut\b|\bwhereas\b|\balthough\b|\bthough\b|\bwhile\b")
_ATTRIBUTION = re.compile(
    r"\b(?:written|painted|invented|composed|directed|built|made|created|developed|discovered|designed|sculpted|credited to|attributed to|is by|was by|a play by|a novel by|a poem by|a book by)\s+(?:by\s+)?((?:[A-Z][\w'.-]+\s*){1,4})"
)
_POSSESSIVE_WORK = re.compile(
    r"\b([A-Z][\w.-]+(?:\s+[A-Z][\w.-]+){0,3})'s\s+(?:work|mural|painting|novel|play|poem|book|film|invention|discovery)\b"
)
_NEVER_HAPPENED = re.compile(
    r"\b(?:this|that|it|which) (?:never|did not|didn't|has never) (?:happened|happen|took place|take place|occurred|occur)\b"
)
#: False-premise questions: the first sentence denies with a pronoun subject ("He wasn't in the series").
_PRONOUN_DENIAL = re.compile(
    r"^(?:no[,.]?\s+)?(?:he|she|it|they|this|that)(?:'s| is| was| were| has| have| had| did| does| do)?\s*(?:not|n't|never)\b|^(?:he|she|it|they)\s+(?:isn't|wasn't|weren't|aren't|hasn't|haven't|didn't|doesn't|don't)\b"
)
#: The question presupposes a negation that the response's first clause contradicts ("Why has
#: the US never been invaded?" - "It has been invaded: ...").
_AFFIRMS = re.compile(
    r"^(?:but\s+)?(?:it|he|she|they|we|there)\s+(?:has|have|had|did|does|do|is|are|was|were|can|could)\b"
)
#: After a clarification cue, the same sentence goes on to answer ("..., but ...").
_ANSWERS_ANYWAY = re.compile(r"[^.!?]*\bbut\b")
_NOTE = re.compile(r"\b(?:note that|keep in mind that|bear in mind that)\b")


def first_match(patterns: Iterable[AbstentionPattern], text: str) -> str | None:
    """The name of the first pattern whose regex occurs in `text`, or None."""
    for pattern in patterns:
        if pattern.regex.search(text):
            return pattern.name
    return None


def detect_abstention(answer: str | None) -> str | None:
    """Name of the first abstention cue in the response, read without its question, or None.

    Context-free: the negations "never", "did not", "was not" count as premise cues here ("He
    never visited Mars."), as they always did; the broader present-tense `is_not` only counts
    with a question. The rule judge uses `classify_abstention`, which reads the question too.
    """
    if not answer:
        return None
    return first_match((p for p in ABSTENTION_PATTERNS if p.name != "is_not"), lower_straight_quotes(answer))


def _content_words(text: str) -> set[str]:
    return {
        stem_plural(w)
        for w in re.findall(r"[a-z0-9]+", lower_straight_quotes(text))
        if w not in STOP_WORDS and (len(w) > 2 or w.isdigit())
    }


def is_polar_question(question: str) -> bool:
    """True for a yes/no question ("Did ...?", "Are both ...?")."""
    return bool(_POLAR_START.match(question or ""))


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT.split(text) if c and c.strip()]


def negates_premise(response: str, question: str, *, attribution: bool = False) -> str | None:
    """Why the response rejects the question's presupposition, or None (see the module docstring).

    `attribution` also accepts the question's act credited to someone it does not name (used
    for false-premise questions).
    """
    text = lower_straight_quotes(response)
    q_words = _content_words(question)
    first_sentence = re.split(r"(?<=[.!?;:])\s", text.strip(), maxsplit=1)[0]
    if _BARE_DENIAL.match(first_sentence.strip()):
        return "bare_denial"
    if _NEVER_HAPPENED.search(text):
        return "never_happened"
    first_clause = (_clauses(first_sentence) or [""])[0]
    if (
        NEGATION.search(lower_straight_quotes(question))
        and _AFFIRMS.match(first_clause)
        and not NEGATION.search(first_clause)
        and _content_words(first_clause) & q_words
    ):
        return "affirms_negated_premise"
    for clause in _clauses(text):
        if NEGATION.search(clause) and _content_words(clause) & q_words:
            return "negated_premise"
    # "X, not Y": the clause after a comma starting with "not" names a question word.
    for match in re.finditer(r"\bnot\s+(?:the\s+|by\s+|in\s+|a\s+)?([a-z0-9' -]+)", text):
        if _content_words(match.group(1)) & q_words:
            return "negated_premise"
    if attribution:
        if _PRONOUN_DENIAL.match(first_sentence.strip()):
            return "pronoun_denial"
        q_lower = lower_straight_quotes(question)
        for pat in (_ATTRIBUTION, _POSSESSIVE_WORK):
            for match in pat.finditer(response):
                names = _content_words(match.group(1))
                if names and not names & _content_words(q_lower):
                    return "other_agent"
        if _NOTE.search(text):
            return "note_that"
    return None


#: A response's sentences (and ";"-separated parts), then their comma / "and" parts: where a
#: list of readings splits (not at the "." of "2.7", the "," of "8,849" or the ":" of "8:30").
_READING_MAJOR = re.compile(r";|[.!?]\s+")
_READING_MINOR = re.compile(r",\s+|\band\b|\bwhile\b|\bwhereas\b|\s[\u2014\u2013-]\s")
_READING_TOKEN = re.compile(r"\([^)]*\)|[\w'&.-]+|[,:]")
_READING_LEAD = frozenset({"in", "of", "for", "at", "on", "the", "and", "as", "if", "but", "with", "by", "from"})
_HEAD_LINK = frozenset({"of", "the", "de", "da", "du", "von", "van"})
_NOT_A_HEAD = frozenset(
    {"here", "there", "it", "this", "that", "these", "those", "they", "he", "she", "i", "we", "you"}
)
#: Distinct named heads (places, organisations, works), each with its own answer.
_MIN_READINGS = 3


def _reading_head(part: str) -> str | None:
    """The capitalised name that opens a part of the response ("In France, ...", "Target at
    10 pm", "Japan: yen"), after leading prepositions and articles, when the part goes on to
    say something about it (a parenthesis alone does not count); lowercased, else None."""
    tokens = _READING_TOKEN.findall(part)
    while tokens and tokens[0].lower() in _READING_LEAD:
        tokens.pop(0)
    head: list[str] = []
    while tokens and (tokens[0][:1].isupper() or (head and tokens[0].lower() in _HEAD_LINK)):
        head.append(tokens.pop(0))
    while head and head[-1].lower() in _HEAD_LINK:
        head.pop()
    said = [t for t in tokens if t not in (",", ":") and not t.startswith("(")]
    if not head or not said or head[0].lower() in _NOT_A_HEAD:
        return None
    return " ".join(head).lower().strip(".")


def answers_several_readings(response: str) -> bool:
    """True when the response answers an underspecified question once per reading: at least
    three sentences (or ";" parts), or else three comma / "and" parts, each opened by a
    different name and saying something about it ("In the United States it is Joe Biden; in
    France, Emmanuel Macron; in Brazil, Lula", "Walmart closes at 11 pm, Target at 10 pm and
    Costco at 8:30 pm", "France: Paris. Germany: Berlin. Japan: Tokyo."). A bare list of names
    ("Tokyo, Delhi, Shanghai and Mexico City") is an answer. Used for UC questions only, where
    it is the over-searching study's "offers multiple perspectives"."""
    for splitter in (_READING_MAJOR, _READING_MINOR):
        heads = {h for part in splitter.split(response.strip()) if (h := _reading_head(part))}
        if len(heads) >= _MIN_READINGS:
            return True
    return False


def _commits_after(response: str, text: str, end: int) -> bool:
    """True when the sentence of an "unknown" cue ending at `end` goes on with "but" and a tail
    that commits (`_TAIL_COMMITS`, or a number / capitalised name) and says nothing unknown.

    "I cannot verify this, but it's about 3 trillion grains" answers; "Nobody knows the exact
    number. Estimates are ..., but an exact count is impossible" and "That remains unknown;
    ..., but a cure may or may not happen" still abstain (the "but" is in another sentence, or
    its tail is itself a cue).
    """
    tail = _BUT_TAIL.match(text, end)
    if tail is None:
        return False
    start, stop = tail.span(1)
    said = text[start:stop]
    if first_match((p for p in ABSTENTION_PATTERNS if p.family in ("unknown", "clarification")), said) is not None:
        return False
    return bool(_TAIL_COMMITS.search(said) or _CANDIDATE.search(response[start:stop]))


def classify_abstention(
    response: str | None,
    question: str | None = None,
    *,
    category: str | None = None,
    answerable: bool | None = None,
    gold_given: bool = False,
) -> str | None:
    """The reason the response abstains (a pattern or rule name), or None when it answers.

    Without a question this is `detect_abstention`. With one, negation cues count only where
    a premise can be corrected (not yes/no questions, not AU questions, not answerable
    questions whose gold answer the response gives) and only when the negation is about the
    question (`negates_premise`); weak uncertainty cues yield to a committing phrase.
    """
    if not response or not response.strip():
        return None
    if question is None:
        return detect_abstention(response)
    text = lower_straight_quotes(response)
    for pattern in ABSTENTION_PATTERNS:
        if pattern.name in NEGATION_CUES:
            continue
        if pattern.family == "unknown":
            match = next((m for m in pattern.regex.finditer(text) if not _commits_after(response, text, m.end())), None)
        else:
            match = pattern.regex.search(text)
        if match is None:
            continue
        if pattern.family == "clarification" and answerable and gold_given and _ANSWERS_ANYWAY.match(text, match.end()):
            continue  # "I'm not sure which year you mean, but the first one was won by X"
        if pattern.family == "premise" and answerable and gold_given:
            continue  # "It's a common misconception that it is Sydney; the capital is Canberra"
        return pattern.name
    if _WEAK.search(text) and not _COMMIT.search(text):
        return "not_sure"
    if category == "UC" and not answerable and answers_several_readings(response):
        return "several_readings"
    premise_possible = not is_polar_question(question) and category != "AU" and not (answerable and gold_given)
    if premise_possible:
        return negates_premise(response, question, attribution=category == "FP")
    return None
