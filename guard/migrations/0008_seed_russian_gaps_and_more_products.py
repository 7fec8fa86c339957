"""A fifth set of guard exemplars (issue 30): Russian gaps and support questions about more products.

Harmful requests in the categories where Russian was caught less often than English (self-harm,
non-violent crime, someone else's personal data, jailbreak) and ordinary support questions about
many more products and services as allowed counter-examples, English and Russian balanced,
written for this project. The groups are sources (the note: "fifth set: <source>") for the
cross-validation of ``scripts/guard_crossval.py``. The data travels with this migration and is
seeded by migration 0007's code (same format); rows staff already have are left alone.
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0008_exemplars.json"
NOTE = "fifth set: "
_fourth = import_module("guard.migrations.0007_seed_broad_benign_counter_examples")  # the same file format


def seed(apps, schema_editor):
    _fourth.seed_groups(apps, DATA, NOTE)


def unseed(apps, schema_editor):
    _fourth.unseed_groups(apps, DATA, NOTE)


class Migration(migrations.Migration):
    dependencies = [("guard", "0007_seed_broad_benign_counter_examples")]
    operations = [migrations.RunPython(seed, unseed)]
