"""A seventh set of guard exemplars (issue 30): allowed everyday chat the screen flagged.

Measured on an independent chat corpus that ships in a package (``scripts/guard_chat_corpus.py``),
the screen flagged about one everyday chat line in ten: questions and remarks about the assistant
itself read as jailbreaks, harmless moods and complaints as self-harm. This set adds allowed
counter-examples in those families (the assistant itself, moods, complaints at the assistant,
statements about oneself, general-knowledge questions), and 12 violent requests per language
(attacks on transport, buildings and crowds) so the new chat does not pull plain violent requests
below the line; English and Russian, written for this project. The groups are sources (the note:
"seventh set: <source>") for ``scripts/guard_crossval.py``; seeded by migration 0007's code (same format), rows staff already have are left alone.
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0010_exemplars.json"
NOTE = "seventh set: "
_fourth = import_module("guard.migrations.0007_seed_broad_benign_counter_examples")  # the same file format


class Migration(migrations.Migration):
    dependencies = [("guard", "0009_seed_informal_registers")]
    operations = [_fourth.seed_operation(DATA, NOTE)]
