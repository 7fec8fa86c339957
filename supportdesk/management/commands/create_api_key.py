"""Create an API key from the command line (the admin's API keys page does the same) and print it once."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from supportdesk.apikeys import api_key_create
from supportdesk.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key with the given scopes and print it (it is stored hashed and never shown again)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="who or what uses the key, e.g. 'helpdesk integration'")
        parser.add_argument("--scope", action="append", choices=ApiKey.SCOPES, required=True, dest="scopes",
                            help="ask (the ask API) or analyst (plan records); repeat for both")

    def handle(self, *args: object, name: str, scopes: list[str], **options: object) -> None:
        created = api_key_create(name=name, scopes=scopes)
        self.stdout.write(created.raw_key)
