"""The "Agents" staff group (issue #29): may handle conversations in the agent inbox (and read them in
the admin), but not edit templates or anything else. Permissions are created after migrations by
Django; this creates the one it needs itself, so the group is complete on a fresh database."""

from django.db import migrations

GROUP = "Agents"
PERMISSIONS = [("handle_conversations", "Can handle conversations in the agent inbox"),
               ("view_conversation", "Can view conversation")]


def forward(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(app_label="supportdesk", model="conversation")
    group, _ = Group.objects.get_or_create(name=GROUP)
    for codename, name in PERMISSIONS:
        permission, _ = Permission.objects.get_or_create(content_type=content_type, codename=codename,
                                                         defaults={"name": name})
        group.permissions.add(permission)


def backward(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("supportdesk", "0010_conversation_handoff"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(forward, backward)]
