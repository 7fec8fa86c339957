from django.apps import AppConfig


class SgrConfig(AppConfig):
    name = "sgr"
