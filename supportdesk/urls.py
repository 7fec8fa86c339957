from django.contrib import admin
from django.urls import path

from supportdesk.api import api
from supportdesk.views import demo_page

urlpatterns = [
    path("", demo_page, name="demo"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
