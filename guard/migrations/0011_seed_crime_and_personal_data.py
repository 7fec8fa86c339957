"""An eighth set of guard exemplars (issue 30): the harmful categories caught least, and their honest twins.

Cross-validated across sources, non-violent crime, copyright and someone else's personal data are
the categories the screen catches least. This set adds harmful requests in them in everyday wording
(drugs, account break-ins, fraud, theft, forgery, bribes, smuggling; cracks, keys, leaked courses
and books; another person's address, records, messages) and as many allowed support questions about
the same things from the victim's or the honest customer's side ("a loan was opened in my name", "my
card was cloned", "my own call history"), English and Russian, written for this project. The groups
are sources (the note: "eighth set: <source>") for ``scripts/guard_crossval.py``; seeded by migration
0007's code (same format), rows staff already have are left alone.
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0011_exemplars.json"
NOTE = "eighth set: "
_fourth = import_module("guard.migrations.0007_seed_broad_benign_counter_examples")  # the same file format


class Migration(migrations.Migration):
    dependencies = [("guard", "0010_seed_everyday_chat")]
    operations = [_fourth.seed_operation(DATA, NOTE)]
