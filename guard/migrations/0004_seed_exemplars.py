"""A starter set of guard exemplars (English and Russian, every taxonomy category, plus
allowed counter-examples from everyday support language). Staff edit them in the admin.

The data travels with this migration (``data/0004_exemplars.json``) and nothing is
imported from live code: the migration keeps meaning what it meant when written.
Vectors are not computed here (that needs the embedder): the provider embeds
exemplars without a vector on first use and stores the result.
"""

import json
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0004_exemplars.json"
NOTE = "starter set"


def _rows():
    for group in json.loads(DATA.read_text(encoding="utf-8"))["groups"]:
        for text in group["texts"]:
            yield text, group["level"], group["category"], group["language"]


def seed(apps, schema_editor):
    GuardExemplar = apps.get_model("guard", "GuardExemplar")
    existing = set(GuardExemplar.objects.values_list("text", "language"))
    GuardExemplar.objects.bulk_create([
        GuardExemplar(text=text, level=level, category=category, language=language, note=NOTE)
        for text, level, category, language in _rows() if (text, language) not in existing
    ])


def unseed(apps, schema_editor):
    GuardExemplar = apps.get_model("guard", "GuardExemplar")
    for text, _level, _category, language in _rows():
        GuardExemplar.objects.filter(text=text, language=language, note=NOTE).delete()


class Migration(migrations.Migration):
    dependencies = [("guard", "0003_exemplars")]
    operations = [migrations.RunPython(seed, unseed)]
