"""Built-in SGR texts: the default response templates and the planning system prompt.

The data migration loads them into the database, where staff edit them; the
renderer falls back to them only when no active row exists (e.g. a database
that was emptied), so a turn can always be rendered.
"""

from __future__ import annotations

from sgr.schema import TOOL_NAME

# What a response template may use. Every value is prepared as a plain string.
TEMPLATE_VARIABLES: frozenset[str] = frozenset(
    {
        "topic",
        "user_intent",
        "category",
        "spam_score",
        "spam_reason",
        "intent_confidence",
        "subqueries",
        "action_plan",
        "uncertainties",
        "clarification_question",
        "guardian_level",
        "guardian_categories",
        "kb_relevance",
        "response",
        "clarify_intro",
        "clarify_outro",
        "searched",
        "searched_intro",
        "handoff_offer",
    }
)

# What the planning system prompt may use.
PROMPT_VARIABLES: frozenset[str] = frozenset(
    {
        "tool_name",
        "guardian_level",
        "guardian_categories",
        "kb_relevance",
        "language",
        "previous_clarification",
        "block_threshold",
        "clarify_threshold",
    }
)

SYSTEM_PROMPT_NAME = "sgr_system"

DEFAULT_SYSTEM_PROMPT = f"""You are the planning step of a customer-support assistant. You do not answer the customer.
Analyse the customer's last message in the context of the conversation and fill in every field of {TOOL_NAME}, in order, following the REASONING STEP descriptions.

Decision guidance for the guardian verdict given below: Safe - plan normally. Controversial - plan a careful, neutral, factual answer and list what is sensitive under uncertainties. Unsafe - set action to guardian_block.

Knowledge-base relevance, given below: 0 = nothing related in our knowledge base, 1 = a close match. A message that matches the knowledge base well is rarely spam.

Spam scores of {{{{ block_threshold }}}} or more block the message; an intent confidence below {{{{ clarify_threshold }}}} makes the assistant ask a clarifying question.

If a previous clarifying question is given below, the customer's message most likely answers it: combine both into one intent.

Write user_intent, the sub-queries and the clarification question in the conversation language.

This message:
- Guardian verdict: {{{{ guardian_level }}}} (categories: {{{{ guardian_categories }}}})
- Knowledge-base relevance: {{{{ kb_relevance }}}}
- Previous clarifying question: {{{{ previous_clarification }}}}
- Conversation language: {{{{ language }}}}"""

_ANALYSIS_EN = """## Analysis
- Topic: {{ topic }}
- Intent: {{ user_intent }}
- Category: {{ category }}
- Validity (spam score): {{ spam_score }}
- Confidence: {{ intent_confidence }}"""

_ANALYSIS_RU = """## Analysis
- Тема: {{ topic }}
- Намерение: {{ user_intent }}
- Категория: {{ category }}
- Валидность (оценка спама): {{ spam_score }}
- Уверенность: {{ intent_confidence }}"""

# Section headings stay "## Analysis" / "## Response" in every language: the
# renderer and the answering model rely on them.
DEFAULT_TEMPLATES: dict[tuple[str, str], str] = {
    ("normal", "en"): _ANALYSIS_EN
    + """
- Sub-queries:
{{ subqueries }}
- Action plan:
{{ action_plan }}
- Uncertainties: {{ uncertainties }}
- Guardian: {{ guardian_level }} ({{ guardian_categories }})

## Response
{{ response }}""",
    ("normal", "ru"): _ANALYSIS_RU
    + """
- Подзапросы:
{{ subqueries }}
- План действий:
{{ action_plan }}
- Неопределённости: {{ uncertainties }}
- Проверка безопасности: {{ guardian_level }} ({{ guardian_categories }})

## Response
{{ response }}""",
    ("clarify", "en"): _ANALYSIS_EN
    + """
- Uncertainties: {{ uncertainties }}
- Guardian: {{ guardian_level }} ({{ guardian_categories }})

## Response
{{ clarify_intro }}

{{ clarification_question }}

{{ clarify_outro }}""",
    ("clarify", "ru"): _ANALYSIS_RU
    + """
- Неопределённости: {{ uncertainties }}
- Проверка безопасности: {{ guardian_level }} ({{ guardian_categories }})

## Response
{{ clarify_intro }}

{{ clarification_question }}

{{ clarify_outro }}""",
    ("block", "en"): _ANALYSIS_EN
    + """
- Spam reason: {{ spam_reason }}
- Action: declined as spam or off-topic

## Response
{{ response }}""",
    ("block", "ru"): _ANALYSIS_RU
    + """
- Причина: {{ spam_reason }}
- Действие: отклонено как спам или не по теме

## Response
{{ response }}""",
    ("guardian_block", "en"): """## Analysis
- Intent: {{ user_intent }}
- Guardian: {{ guardian_level }}
- Guardian categories: {{ guardian_categories }}
- Action: declined by the safety check

## Response
{{ response }}""",
    ("no_answer", "en"): _ANALYSIS_EN
    + """
- Searched: {{ searched }}
- Action: the knowledge base does not cover this request; nothing was answered

## Response
{{ response }} {{ searched_intro }} {{ searched }}.

{{ handoff_offer }}""",
    ("no_answer", "ru"): _ANALYSIS_RU
    + """
- Поиск: {{ searched }}
- Действие: база знаний не покрывает этот запрос; ответ не составлялся

## Response
{{ response }} {{ searched_intro }} {{ searched }}.

{{ handoff_offer }}""",
    ("guardian_block", "ru"): """## Analysis
- Намерение: {{ user_intent }}
- Проверка безопасности: {{ guardian_level }}
- Категории: {{ guardian_categories }}
- Действие: отклонено проверкой безопасности

## Response
{{ response }}""",
    ("handoff", "en"): _ANALYSIS_EN
    + """
- Action: the customer asks for a person; the conversation is handed to staff

## Response
{{ response }}""",
    ("handoff", "ru"): _ANALYSIS_RU
    + """
- Действие: клиент просит человека; разговор передан сотрудникам

## Response
{{ response }}""",
}
