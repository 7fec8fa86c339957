"""The project's URLs: this wiring, unlike the domain apps, may import the read side (``analytics``)."""

from django.contrib import admin
from django.urls import path

from analytics.dashboard import dashboard_view
from config.api import api
from supportdesk.inbox_views import inbox_action, inbox_conversation_json, inbox_page, inbox_queue_json
from supportdesk.views import demo_page, favicon

urlpatterns = [
    path("", demo_page, name="demo"),
    path("favicon.ico", favicon),
    path("admin/dashboard/", dashboard_view, name="dashboard"),
    # The agent inbox (issue #29): staff in the Agents group.
    path("admin/inbox/", inbox_page, name="inbox"),
    path("admin/inbox/queue.json", inbox_queue_json, name="inbox_queue"),
    path("admin/inbox/c/<uuid:public_id>.json", inbox_conversation_json, name="inbox_conversation"),
    path("admin/inbox/c/<uuid:public_id>/<slug:action>", inbox_action, name="inbox_action"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
