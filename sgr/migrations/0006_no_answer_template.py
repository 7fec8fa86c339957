"""The ``no_answer`` final action (DT-002, decided in code after the plan's searches): its response
templates in English and Russian, editable by staff like the others. The bodies are written out
here: the migration keeps meaning what it meant when written."""

from django.db import migrations, models

BODIES = {
    "en": "## Analysis\n- Topic: {{ topic }}\n- Intent: {{ user_intent }}\n- Category: {{ category }}\n- Validity (spam score): {{ spam_score }}\n- Confidence: {{ intent_confidence }}\n- Searched: {{ searched }}\n- Action: the knowledge base does not cover this request; nothing was answered\n\n## Response\n{{ response }} {{ searched_intro }} {{ searched }}.\n\n{{ handoff_offer }}",
    "ru": "## Analysis\n- Тема: {{ topic }}\n- Намерение: {{ user_intent }}\n- Категория: {{ category }}\n- Валидность (оценка спама): {{ spam_score }}\n- Уверенность: {{ intent_confidence }}\n- Поиск: {{ searched }}\n- Действие: база знаний не покрывает этот запрос; ответ не составлялся\n\n## Response\n{{ response }} {{ searched_intro }} {{ searched }}.\n\n{{ handoff_offer }}",
}


def forward(apps, schema_editor):
    ResponseTemplate = apps.get_model("sgr", "ResponseTemplate")
    TextVersion = apps.get_model("sgr", "TextVersion")
    for language, body in BODIES.items():
        if not ResponseTemplate.objects.filter(name="no_answer", language=language, is_active=True).exists():
            row = ResponseTemplate.objects.create(name="no_answer", language=language, body=body)
            TextVersion.objects.get_or_create(kind="response", object_id=row.pk, version=row.version,
                                              defaults={"body": body, "author_id": None})


def backward(apps, schema_editor):
    apps.get_model("sgr", "ResponseTemplate").objects.filter(name="no_answer").delete()


class Migration(migrations.Migration):
    dependencies = [("sgr", "0005_responsetemplate_handoff_action")]

    operations = [
        migrations.AlterField(
            model_name="responsetemplate",
            name="name",
            field=models.CharField(choices=[("normal", "normal"), ("clarify", "clarify"), ("block", "block"),
                                            ("guardian_block", "guardian_block"), ("handoff", "handoff"),
                                            ("no_answer", "no_answer")],
                                   max_length=32),
        ),
        migrations.AddField(model_name="planrecord", name="answer_supported_share",
                            field=models.FloatField(blank=True, null=True)),
        migrations.RunPython(forward, backward),
    ]
