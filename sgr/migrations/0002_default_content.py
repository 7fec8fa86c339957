"""Load the default response templates (4 actions x en/ru), the planning prompt and the UI strings."""

from django.db import migrations

from sgr.defaults import DEFAULT_SYSTEM_PROMPT, DEFAULT_TEMPLATES, SYSTEM_PROMPT_NAME
from sgr.strings import BUILTIN_STRINGS


def load(apps, schema_editor):
    # Historical models: plain inserts, no validation hooks; the defaults are valid by test.
    ResponseTemplate = apps.get_model("sgr", "ResponseTemplate")
    PromptTemplate = apps.get_model("sgr", "PromptTemplate")
    UIString = apps.get_model("sgr", "UIString")
    for (name, language), body in DEFAULT_TEMPLATES.items():
        if not ResponseTemplate.objects.filter(name=name, language=language, is_active=True).exists():
            ResponseTemplate.objects.create(name=name, language=language, body=body)
    if not PromptTemplate.objects.filter(name=SYSTEM_PROMPT_NAME, is_active=True).exists():
        PromptTemplate.objects.create(name=SYSTEM_PROMPT_NAME, body=DEFAULT_SYSTEM_PROMPT)
    for key, variants in BUILTIN_STRINGS.items():
        for language, text in variants.items():
            UIString.objects.get_or_create(key=key, language=language, defaults={"text": text})


def unload(apps, schema_editor):
    apps.get_model("sgr", "ResponseTemplate").objects.filter(author__isnull=True, version=1).delete()
    apps.get_model("sgr", "PromptTemplate").objects.filter(name=SYSTEM_PROMPT_NAME, version=1).delete()


class Migration(migrations.Migration):
    dependencies = [("sgr", "0001_initial")]

    operations = [migrations.RunPython(load, unload)]
