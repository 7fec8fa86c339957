from django.apps import AppConfig


class GuardConfig(AppConfig):
    name = "guard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from guard import checks  # noqa: F401  (registers the settings check)
