"""A small starting set of rules so the default ``rules`` provider does something
out of the box. Staff edit, disable or delete them in the admin."""

from django.db import migrations

SEED_RULES = [
    # (category, level, kind, pattern, language, note)
    ("jailbreak", "Unsafe", "regex",
     r"\bignore\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier)\s+(?:instructions|rules|prompts?)\b",
     "en", "prompt injection"),
    ("jailbreak", "Unsafe", "regex",
     r"(?:игнорируй|игнорируйте|забудь|забудьте)\s+(?:все\s+)?(?:предыдущие|прошлые|свои)\s+(?:инструкции|указания|правила)",
     "ru", "prompt injection"),
    ("self_harm", "Controversial", "keyword", "kill myself", "en", "route to a human with care"),
    ("self_harm", "Controversial", "keyword", "покончить с собой", "ru", "route to a human with care"),
]


def seed(apps, schema_editor):
    GuardRule = apps.get_model("guard", "GuardRule")
    for category, level, kind, pattern, language, note in SEED_RULES:
        GuardRule.objects.get_or_create(
            kind=kind, pattern=pattern, language=language,
            defaults={"category": category, "level": level, "note": note},
        )


def unseed(apps, schema_editor):
    GuardRule = apps.get_model("guard", "GuardRule")
    for _category, _level, kind, pattern, language, _note in SEED_RULES:
        GuardRule.objects.filter(kind=kind, pattern=pattern, language=language).delete()


class Migration(migrations.Migration):
    dependencies = [("guard", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
