from django.apps import AppConfig


class SgrConfig(AppConfig):
    name = "sgr"
    verbose_name = "SGR"

    def ready(self) -> None:
        from sgr import checks  # noqa: F401  (registers the system checks)
