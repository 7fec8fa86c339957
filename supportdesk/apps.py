from django.apps import AppConfig


class SupportDeskConfig(AppConfig):
    name = "supportdesk"
    verbose_name = "SupportDesk"
