"""The `handoff` action (issue #29): its name among the template choices, and its default response
templates (en/ru), frozen here as written (a migration imports no live code)."""

from django.db import migrations, models

TEMPLATES = {('handoff', 'en'): '## Analysis\n- Topic: {{ topic }}\n- Intent: {{ user_intent }}\n- Category: {{ category }}\n- Validity (spam score): {{ spam_score }}\n- Confidence: {{ intent_confidence }}\n- Action: the customer asks for a person; the conversation is handed to staff\n\n## Response\n{{ response }}', ('handoff', 'ru'): '## Analysis\n- Тема: {{ topic }}\n- Намерение: {{ user_intent }}\n- Категория: {{ category }}\n- Валидность (оценка спама): {{ spam_score }}\n- Уверенность: {{ intent_confidence }}\n- Действие: клиент просит человека; разговор передан сотрудникам\n\n## Response\n{{ response }}'}


def seed(apps, schema_editor):
    ResponseTemplate = apps.get_model("sgr", "ResponseTemplate")
    TextVersion = apps.get_model("sgr", "TextVersion")
    for (name, language), body in TEMPLATES.items():
        if not ResponseTemplate.objects.filter(name=name, language=language, is_active=True).exists():
            row = ResponseTemplate.objects.create(name=name, language=language, body=body)
            TextVersion.objects.get_or_create(kind="response", object_id=row.pk, version=row.version,
                                              defaults={"body": body, "author_id": None})


def unseed(apps, schema_editor):
    apps.get_model("sgr", "ResponseTemplate").objects.filter(name="handoff", author__isnull=True, version=1).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('sgr', '0004_planning_prompt_fixed_first'),
    ]

    operations = [
        migrations.AlterField(
            model_name='responsetemplate',
            name='name',
            field=models.CharField(choices=[('normal', 'normal'), ('clarify', 'clarify'), ('block', 'block'), ('guardian_block', 'guardian_block'), ('handoff', 'handoff')], max_length=32),
        ),
        migrations.RunPython(seed, unseed),
    ]
