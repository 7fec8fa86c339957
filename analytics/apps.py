from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    verbose_name = "Analytics"

    def ready(self) -> None:
        from analytics.messages import ANALYTICS_STRINGS
        from sgr.strings import strings_register

        strings_register(ANALYTICS_STRINGS)
