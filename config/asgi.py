"""ASGI entry point: HTTP through Django, websockets through Channels with an origin check
(the site's own hosts plus the widget origins allowed in settings)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from supportdesk.logredact import server_logs_masked  # noqa: E402

server_logs_masked()  # the server logs every websocket path, ?token=... included

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402  (needs Django set up)

from supportdesk.origins import WidgetOriginValidator  # noqa: E402
from supportdesk.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": WidgetOriginValidator(URLRouter(websocket_urlpatterns)),
    }
)

from config.heap import startup_objects_freeze  # noqa: E402

startup_objects_freeze()  # everything loaded so far lives as long as the process
