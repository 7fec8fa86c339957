"""Load the default response templates (4 actions x en/ru), the planning prompt and the UI strings.

The data travels with this migration (``data/0002_default_content.json``, frozen from the
built-ins when it was written) and nothing is imported from live code: the migration keeps
meaning what it meant when written. Later fixes to built-in UI strings still reach databases
seeded here: a row that still holds its seeded text is not an override (``sgr.strings``).
"""

import json
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0002_default_content.json"


def _data():
    return json.loads(DATA.read_text(encoding="utf-8"))


def load(apps, schema_editor):
    # Historical models: plain inserts, no validation hooks; the defaults are valid by test.
    ResponseTemplate = apps.get_model("sgr", "ResponseTemplate")
    PromptTemplate = apps.get_model("sgr", "PromptTemplate")
    UIString = apps.get_model("sgr", "UIString")
    data = _data()
    for template in data["response_templates"]:
        name, language = template["name"], template["language"]
        if not ResponseTemplate.objects.filter(name=name, language=language, is_active=True).exists():
            ResponseTemplate.objects.create(name=name, language=language, body=template["body"])
    prompt = data["system_prompt"]
    if not PromptTemplate.objects.filter(name=prompt["name"], is_active=True).exists():
        PromptTemplate.objects.create(name=prompt["name"], body=prompt["body"])
    for key, variants in data["ui_strings"].items():
        for language, text in variants.items():
            UIString.objects.get_or_create(key=key, language=language, defaults={"text": text})


def unload(apps, schema_editor):
    apps.get_model("sgr", "ResponseTemplate").objects.filter(author__isnull=True, version=1).delete()
    apps.get_model("sgr", "PromptTemplate").objects.filter(name=_data()["system_prompt"]["name"], version=1).delete()


class Migration(migrations.Migration):
    dependencies = [("sgr", "0001_initial")]

    operations = [migrations.RunPython(load, unload)]
