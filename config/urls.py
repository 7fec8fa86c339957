"""The project's URLs: this wiring, unlike the domain apps, may import the read side (``analytics``)."""

from django.contrib import admin
from django.urls import path

from analytics.dashboard import dashboard_view
from config.api import api
from supportdesk.views import demo_page, favicon

urlpatterns = [
    path("", demo_page, name="demo"),
    path("favicon.ico", favicon),
    path("admin/dashboard/", dashboard_view, name="dashboard"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
