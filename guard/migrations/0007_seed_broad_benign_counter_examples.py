"""A fourth set of guard exemplars (issue 30): a broad benign set of allowed counter-examples.

Ordinary support questions about many products (software, banking, delivery, telecom,
shopping), everyday chat and assistant requests, and harmless questions on sensitive topics
(history, fiction, safety advice, security defence, harmless uses of violent words), in English
and Russian, written for this project. Each group names its source, kept in the exemplar's note
("fourth set: <source>"), so the exemplar classifier is cross-validated across sources
(``scripts/guard_crossval.py``). The held-apart part of the same sources
(``guard/devset/guard_heldout.jsonl``) is never seeded. Like 0004-0006, the data travels with
this migration and rows staff already have (same text and language) are left alone.
"""

import json
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0007_exemplars.json"
NOTE = "fourth set: "


def _rows(data=DATA, note=NOTE):
    for group in json.loads(data.read_text(encoding="utf-8"))["groups"]:
        for text in group["texts"]:
            yield text, group["level"], group["category"], group["language"], note + group["source"]


def seed_groups(apps, data, note):
    """Seed the groups of ``data`` (``{"groups": [{"source", "level", "category", "language", "texts"}]}``),
    each row's note ``note + source``; rows staff already have (same text and language) are left alone.
    Migration 0008 seeds its own file with it."""
    GuardExemplar = apps.get_model("guard", "GuardExemplar")
    existing = set(GuardExemplar.objects.values_list("text", "language"))
    GuardExemplar.objects.bulk_create([
        GuardExemplar(text=text, level=level, category=category, language=language, note=row_note)
        for text, level, category, language, row_note in _rows(data, note) if (text, language) not in existing
    ])


def unseed_groups(apps, data, note):
    GuardExemplar = apps.get_model("guard", "GuardExemplar")
    for text, _level, _category, language, row_note in _rows(data, note):
        GuardExemplar.objects.filter(text=text, language=language, note=row_note).delete()


def seed_operation(data, note):
    """The migration operation that seeds ``data``'s groups with ``seed_groups`` and unseeds them on the
    way back (migration 0009 is just this)."""
    return migrations.RunPython(lambda apps, schema_editor: seed_groups(apps, data, note),
                                lambda apps, schema_editor: unseed_groups(apps, data, note))


def seed(apps, schema_editor):
    seed_groups(apps, DATA, NOTE)


def unseed(apps, schema_editor):
    unseed_groups(apps, DATA, NOTE)


class Migration(migrations.Migration):
    dependencies = [("guard", "0006_seed_off_topic_counter_examples")]
    operations = [migrations.RunPython(seed, unseed)]
