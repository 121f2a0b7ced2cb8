"""Negative-evidence augmentation: synthetic documents saying why a question cannot be answered.

The over-searching study adds, for each unanswerable question, short encyclopedic documents
explaining why the information asked for is unavailable or cannot be determined, one per
*angle* (`ANGLES`: ambiguity, coverage gaps, methodological limits, ...), to the corpus; an agent
that retrieves them has evidence for abstaining. The study found the effect weak and blamed
poor ranking of these documents, so `rank_report` measures how often they reach the top-k for
their own question.

Pipeline (`branchpoint augment`):
1. `generate_negative_docs`: for each question and each of the first `n` angles, one model call
   (chat or completion style) asking for a `Title: ...` line and ~100 words; `parse_generated`
   reads the reply robustly; a malformed reply is retried once with a format reminder, then
   skipped and counted.
2. `write_augmented_corpus`: OUT/corpus.jsonl = the original passages followed by the generated
   documents (FlashRAG `{"id", "contents"}`, ids `neg-<question id>-<angle index>`, angle
   index 0-9 in `ANGLES` order); OUT/generated.jsonl = one row per generated document
   (id, question_id, question, angle_index, angle, title, text). Rerunning into the same OUT
   reuses rows of generated.jsonl whose question is unchanged and generates only what is missing.
3. `rank_report`: search each question's own text on an index of the augmented corpus and count
   where its generated documents rank.

Modules: `documents` (the angles and the document record), `prompts` (prompts and parsing of
replies), `generate` (the model calls), `corpus` (generated.jsonl, the augmented corpus and the
resumable `augment`), `rank_report` (where the documents rank).
"""
