"""The "Agents" staff group (issue #29): may handle conversations in the agent inbox (and read them and
their turns' plan records in the admin), but not edit templates or anything else. Permissions are created after migrations by
Django; this creates the one it needs itself, so the group is complete on a fresh database."""

from django.db import migrations

GROUP = "Agents"
PERMISSIONS = [("supportdesk", "conversation", "handle_conversations", "Can handle conversations in the agent inbox"),
               ("supportdesk", "conversation", "view_conversation", "Can view conversation"),
               ("sgr", "planrecord", "view_planrecord", "Can view plan record")]


def forward(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name=GROUP)
    for app_label, model, codename, name in PERMISSIONS:
        content_type, _ = ContentType.objects.get_or_create(app_label=app_label, model=model)
        permission, _ = Permission.objects.get_or_create(content_type=content_type, codename=codename,
                                                         defaults={"name": name})
        group.permissions.add(permission)


def backward(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("supportdesk", "0010_conversation_handoff"),
        ("sgr", "0005_responsetemplate_handoff_action"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(forward, backward)]
