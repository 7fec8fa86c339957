"""Create (once) the demo staff account and print its credentials; load the demo KB."""

from __future__ import annotations

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from retrieval.demo import DEMO_KB_DIR

DEMO_USERNAME = "staff"


class Command(BaseCommand):
    help = "Create the demo staff account (credentials kept in .data/demo-staff.txt) and load the demo KB."

    def handle(self, *args: object, **options: object) -> None:
        credentials = Path(settings.BASE_DIR) / ".data" / "demo-staff.txt"
        user_model = get_user_model()
        password = _stored_password(credentials)
        if not (password and user_model.objects.filter(username=DEMO_USERNAME).exists()):
            password = secrets.token_urlsafe(12)
            user, _ = user_model.objects.get_or_create(username=DEMO_USERNAME)
            user.is_staff = True
            user.is_superuser = True
            user.set_password(password)
            user.save()
            credentials.parent.mkdir(parents=True, exist_ok=True)
            credentials.write_text(f"username: {DEMO_USERNAME}\npassword: {password}\nlogin: /admin/\n")
            credentials.chmod(0o600)
        self.stdout.write(f"[supportdesk] demo staff account: {DEMO_USERNAME} / {password}")
        # Idempotent: unchanged demo documents are skipped by content hash.
        self.stdout.write("[supportdesk] loading the demo knowledge base ...")
        call_command("ingest_kb", str(DEMO_KB_DIR), stdout=self.stdout._out, stderr=self.stderr._out)


def _stored_password(credentials: Path) -> str:
    """The password in the credentials file ("password: ..." line; older files held it alone)."""
    if not credentials.exists():
        return ""
    lines = [line.strip() for line in credentials.read_text().splitlines() if line.strip()]
    for line in lines:
        if line.startswith("password:"):
            return line.removeprefix("password:").strip()
    return lines[0] if len(lines) == 1 and ":" not in lines[0] else ""
