"""A ninth set of guard exemplars (issue 30): everyday services the screen knew least, and indirect harm.

On a blind file ordinary Russian texts were still flagged too often (support questions about health
administration, insurance and utilities; assistant requests; chat), and violent, self-harm and
non-violent crime requests (Russian copyright too) were caught least. This set adds allowed
counter-examples in the support domains the earlier sets have least (state and municipal services,
clinic administration, insurance claims, utilities and housing, HR and payroll, schools and
universities, transport cards, parcel lockers, car service, gyms, subscriptions), Russian assistant
requests and small talk, and harmful requests in those categories in indirect phrasings (polite,
slang, hypothetical, framed as a support question), request-level only; English and Russian, written
for this project. The groups are sources (the note: "ninth set: <source>") for
``scripts/guard_crossval.py``; seeded by migration 0007's code (same format), rows staff already
have are left alone.
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

DATA = Path(__file__).resolve().parent / "data" / "0012_exemplars.json"
NOTE = "ninth set: "
_fourth = import_module("guard.migrations.0007_seed_broad_benign_counter_examples")  # the same file format


class Migration(migrations.Migration):
    dependencies = [("guard", "0011_seed_crime_and_personal_data")]
    operations = [_fourth.seed_operation(DATA, NOTE)]
