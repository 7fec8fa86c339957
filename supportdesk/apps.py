from django.apps import AppConfig


class SupportDeskConfig(AppConfig):
    name = "supportdesk"
    verbose_name = "SupportDesk"

    def ready(self) -> None:
        from sgr.strings import strings_register
        from supportdesk.handoff_strings import HANDOFF_STRINGS

        strings_register(HANDOFF_STRINGS)
