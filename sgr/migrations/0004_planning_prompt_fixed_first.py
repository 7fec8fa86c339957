"""The planning prompt's fixed text first, this message's values last (the guardian verdict,
knowledge-base relevance, previous clarifying question, language): the model server then reuses
the cached prompt up to those values (~130 tokens less to read per plan on the local model).

Only a prompt that still holds the seeded text is changed; a prompt staff edited stays as it
is. The change is a new version, so the history shows it and staff can roll it back. The bodies
are written out here: the migration keeps meaning what it meant when written.
"""

from django.db import migrations

NAME = "sgr_system"
SEEDED = 'You are the planning step of a customer-support assistant. You do not answer the customer.\nAnalyse the customer\'s last message in the context of the conversation and fill in every field of analyse_user_request, in order, following the REASONING STEP descriptions.\n\nGuardian verdict for this message: {{ guardian_level }} (categories: {{ guardian_categories }}).\nDecision guidance: Safe - plan normally. Controversial - plan a careful, neutral, factual answer and list what is sensitive under uncertainties. Unsafe - set action to guardian_block.\n\nKnowledge-base relevance of the message: {{ kb_relevance }} (0 = nothing related in our knowledge base, 1 = a close match; "unknown" = not measured).\nA message that matches the knowledge base well is rarely spam.\n\nSpam scores of {{ block_threshold }} or more block the message; an intent confidence below {{ clarify_threshold }} makes the assistant ask a clarifying question.\n\nThe previous clarifying question asked to this customer: {{ previous_clarification }}. If it is not "none", the customer\'s message most likely answers it: combine both into one intent.\n\nConversation language: {{ language }}. Write user_intent, the sub-queries and the clarification question in that language.'
FIXED_FIRST = 'You are the planning step of a customer-support assistant. You do not answer the customer.\nAnalyse the customer\'s last message in the context of the conversation and fill in every field of analyse_user_request, in order, following the REASONING STEP descriptions.\n\nDecision guidance for the guardian verdict given below: Safe - plan normally. Controversial - plan a careful, neutral, factual answer and list what is sensitive under uncertainties. Unsafe - set action to guardian_block.\n\nKnowledge-base relevance, given below: 0 = nothing related in our knowledge base, 1 = a close match; "unknown" = not measured. A message that matches the knowledge base well is rarely spam.\n\nSpam scores of {{ block_threshold }} or more block the message; an intent confidence below {{ clarify_threshold }} makes the assistant ask a clarifying question.\n\nIf a previous clarifying question is given below, the customer\'s message most likely answers it: combine both into one intent.\n\nWrite user_intent, the sub-queries and the clarification question in the conversation language.\n\nThis message:\n- Guardian verdict: {{ guardian_level }} (categories: {{ guardian_categories }})\n- Knowledge-base relevance: {{ kb_relevance }}\n- Previous clarifying question: {{ previous_clarification }}\n- Conversation language: {{ language }}'


def _replace(apps, current, new):
    PromptTemplate = apps.get_model("sgr", "PromptTemplate")
    TextVersion = apps.get_model("sgr", "TextVersion")
    for row in PromptTemplate.objects.filter(name=NAME, is_active=True, body=current):
        row.body, row.version = new, row.version + 1
        row.save(update_fields=["body", "version", "updated_at"])
        TextVersion.objects.get_or_create(kind="prompt", object_id=row.pk, version=row.version,
                                          defaults={"body": new, "author_id": None})


def forward(apps, schema_editor):
    _replace(apps, SEEDED, FIXED_FIRST)


def backward(apps, schema_editor):
    _replace(apps, FIXED_FIRST, SEEDED)


class Migration(migrations.Migration):
    dependencies = [("sgr", "0003_text_versions")]

    operations = [migrations.RunPython(forward, backward)]
