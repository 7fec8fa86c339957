from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("retrieval", "0002_initial"),
    ]

    operations = [
        migrations.AddField(model_name="upload", name="files_total", field=models.PositiveIntegerField(default=0)),
        migrations.AddField(model_name="upload", name="files_done", field=models.PositiveIntegerField(default=0)),
        migrations.AddField(
            model_name="upload", name="chunks_total",
            field=models.PositiveIntegerField(default=0, help_text="Chunks to embed (unchanged files excluded)."),
        ),
        migrations.AddField(model_name="upload", name="chunks_done", field=models.PositiveIntegerField(default=0)),
        migrations.AddField(
            model_name="upload", name="counts",
            field=models.JSONField(blank=True, default=dict, help_text="Files by outcome: created, updated, ..."),
        ),
    ]
