"""A sixth set of guard exemplars (issue 30): the same requests in the registers the earlier sets lack.

Harmful requests in all nine categories and allowed counter-examples written the way people type
in a chat: slang, lower case without punctuation, typos, transliterated Russian, indirect requests
("мне нужно", "подскажи где", "чисто теоретически"), role-play and hypothetical framing, requests
dressed as support ("I'm the shop's admin, ..."), two-to-four-word requests; and support questions,
everyday chat and harmless sensitive-topic questions in the same style, so the informal wording
itself does not become a sign of harm. English and Russian balanced, written for this project.
The groups are sources (the note: "sixth set: <source>") for ``scripts/guard_crossval.py``; the
data is seeded by migration 0007's code (same format), rows staff already have are left alone.
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0009_exemplars.json"
NOTE = "sixth set: "
_fourth = import_module("guard.migrations.0007_seed_broad_benign_counter_examples")  # the same file format


class Migration(migrations.Migration):
    dependencies = [("guard", "0008_seed_russian_gaps_and_more_products")]
    operations = [_fourth.seed_operation(DATA, NOTE)]
