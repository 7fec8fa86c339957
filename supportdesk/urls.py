"""The project's URLs: this wiring, unlike the domain apps, may import the read side (``analytics``)."""

from django.contrib import admin
from django.urls import path

from analytics.api import router as analyst_router
from analytics.dashboard import dashboard_view
from supportdesk.api import api
from supportdesk.views import demo_page, favicon

api.add_router("/v1/plan-records", analyst_router)

urlpatterns = [
    path("", demo_page, name="demo"),
    path("favicon.ico", favicon),
    path("admin/dashboard/", dashboard_view, name="dashboard"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
