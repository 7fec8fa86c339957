"""A third set of guard exemplars: allowed counter-examples for harmless messages that are not about
the product (general knowledge, weather, sports, cooking, creative requests, jokes, chit-chat,
homework, advertising and other commercial spam, keyboard gibberish).

Such texts are far from every support exemplar, so their nearest neighbours used to be harmful
ones ("write a poem about the sea" was flagged as sexual and self-harm, a shoe advert as illegal):
they ended as ``guardian_block`` instead of the planner's ``block`` (DT-002). Being off-topic is
not a safety verdict. Like 0004 and 0005, the data travels with this migration
(``data/0006_exemplars.json``), nothing is imported from live code, and rows staff already have
(same text and language) are left alone.
"""

import json
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0006_exemplars.json"
NOTE = "third set: harmless off-topic and advertising"


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
    dependencies = [("guard", "0005_seed_counter_examples")]
    operations = [migrations.RunPython(seed, unseed)]
