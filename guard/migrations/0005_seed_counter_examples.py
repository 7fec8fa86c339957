"""A second set of guard exemplars, measured on the development set with ``evaluate_guard``:
allowed counter-examples for tricky safe families (homonyms in tech and everyday language,
fiction, history and news, definitions, defensive security, medical facts, games) that the
starter set flagged, and harmful phrasings it missed (instruction-style requests, self-harm
methods, hateful posts, defamation, cracking, fencing). English and Russian.

Like 0004, the data travels with this migration (``data/0005_exemplars.json``), nothing is
imported from live code, and vectors are computed by the provider on first use. Rows staff
already have (same text and language) are left alone.
"""

import json
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0005_exemplars.json"
NOTE = "second set: counter-examples and gaps"


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
    dependencies = [("guard", "0004_seed_exemplars")]
    operations = [migrations.RunPython(seed, unseed)]
