from django.contrib import admin
from django.urls import path

from supportdesk.api import api
from supportdesk.dashboard import dashboard_view
from supportdesk.views import demo_page, favicon

urlpatterns = [
    path("", demo_page, name="demo"),
    path("favicon.ico", favicon),
    path("admin/dashboard/", dashboard_view, name="dashboard"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
