"""The planning prompt without its note on "unknown" knowledge-base relevance: the 1.5B model copied
that word as the reason, the intent and the only sub-query of Russian questions it could not restate
("unknown", "unknown, not measured"), which then searched nothing (docs/benchmarks.md, issue 28). A
relevance not measured is still shown as "unknown"; the note only explained it.

Only a prompt that still holds the text of 0004 is changed; a prompt staff edited stays as it is. The
change is a new version, so the history shows it and staff can roll it back. The bodies are written out
here: the migration keeps meaning what it meant when written.
"""

from importlib import import_module

from django.db import migrations

# The same replacement of the seeded text by a new version as 0004 (migrations do not change once written).
_replace = import_module("sgr.migrations.0004_planning_prompt_fixed_first")._replace
WITH_UNKNOWN = 'You are the planning step of a customer-support assistant. You do not answer the customer.\nAnalyse the customer\'s last message in the context of the conversation and fill in every field of analyse_user_request, in order, following the REASONING STEP descriptions.\n\nDecision guidance for the guardian verdict given below: Safe - plan normally. Controversial - plan a careful, neutral, factual answer and list what is sensitive under uncertainties. Unsafe - set action to guardian_block.\n\nKnowledge-base relevance, given below: 0 = nothing related in our knowledge base, 1 = a close match; "unknown" = not measured. A message that matches the knowledge base well is rarely spam.\n\nSpam scores of {{ block_threshold }} or more block the message; an intent confidence below {{ clarify_threshold }} makes the assistant ask a clarifying question.\n\nIf a previous clarifying question is given below, the customer\'s message most likely answers it: combine both into one intent.\n\nWrite user_intent, the sub-queries and the clarification question in the conversation language.\n\nThis message:\n- Guardian verdict: {{ guardian_level }} (categories: {{ guardian_categories }})\n- Knowledge-base relevance: {{ kb_relevance }}\n- Previous clarifying question: {{ previous_clarification }}\n- Conversation language: {{ language }}'
WITHOUT_UNKNOWN = "You are the planning step of a customer-support assistant. You do not answer the customer.\nAnalyse the customer's last message in the context of the conversation and fill in every field of analyse_user_request, in order, following the REASONING STEP descriptions.\n\nDecision guidance for the guardian verdict given below: Safe - plan normally. Controversial - plan a careful, neutral, factual answer and list what is sensitive under uncertainties. Unsafe - set action to guardian_block.\n\nKnowledge-base relevance, given below: 0 = nothing related in our knowledge base, 1 = a close match. A message that matches the knowledge base well is rarely spam.\n\nSpam scores of {{ block_threshold }} or more block the message; an intent confidence below {{ clarify_threshold }} makes the assistant ask a clarifying question.\n\nIf a previous clarifying question is given below, the customer's message most likely answers it: combine both into one intent.\n\nWrite user_intent, the sub-queries and the clarification question in the conversation language.\n\nThis message:\n- Guardian verdict: {{ guardian_level }} (categories: {{ guardian_categories }})\n- Knowledge-base relevance: {{ kb_relevance }}\n- Previous clarifying question: {{ previous_clarification }}\n- Conversation language: {{ language }}"


def forward(apps, schema_editor):
    _replace(apps, WITH_UNKNOWN, WITHOUT_UNKNOWN)


def backward(apps, schema_editor):
    _replace(apps, WITHOUT_UNKNOWN, WITH_UNKNOWN)


class Migration(migrations.Migration):
    dependencies = [("sgr", "0006_no_answer_template")]

    operations = [migrations.RunPython(forward, backward)]
