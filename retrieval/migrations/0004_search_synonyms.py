# Search synonyms (retrieval.synonyms) and a starter set of them.

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0003_upload_progress'),
    ]

    operations = [
        migrations.CreateModel(
            name='SearchSynonym',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('language', models.CharField(choices=[('en', 'English'), ('ru', 'Russian')], default='en', max_length=8)),
                ('words', models.CharField(help_text='Two or more single words, separated by commas (e.g. idle, standby).', max_length=500)),
                ('enabled', models.BooleanField(default=True)),
                ('ts_config', models.CharField(default='', editable=False, max_length=16)),
                ('lexemes', django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=100), default=list, editable=False, size=None)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['language', 'words'],
            },
        ),
    ]


# Everyday support vocabulary that help-centre articles and customers word differently.
# Conservative on purpose: a word with another common meaning ("charge", "plan", "order")
# would widen unrelated questions. Staff add their own in the admin (Search synonyms).
DEFAULT_GROUPS = {
    "en": ["idle, standby", "price, cost", "refund, reimbursement", "password, passcode", "login, signin",
           "delivery, shipping", "faulty, defective", "restart, reboot", "invoice, bill", "purchase, buy"],
    "ru": ["возврат, возмещение", "цена, стоимость", "доставка, пересылка", "неисправный, бракованный, дефектный",
           "перезагрузить, перезапустить"],
}
TS_CONFIGS = {"en": "english", "ru": "russian"}


def seed(apps, schema_editor):
    SearchSynonym = apps.get_model("retrieval", "SearchSynonym")
    with schema_editor.connection.cursor() as cursor:
        for language, groups in DEFAULT_GROUPS.items():
            config = TS_CONFIGS[language]
            for words in groups:
                lexemes: list[str] = []
                for word in words.split(","):
                    cursor.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", [config, word.strip()])
                    lexemes += [lexeme for lexeme in cursor.fetchone()[0] if lexeme not in lexemes]
                SearchSynonym.objects.create(language=language, words=words, ts_config=config, lexemes=lexemes)


Migration.operations.append(migrations.RunPython(seed, migrations.RunPython.noop))
