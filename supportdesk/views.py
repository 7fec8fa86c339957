from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.views.generic import RedirectView

from sgr.strings import supported_language, ui_string


def demo_page(request: HttpRequest) -> HttpResponse:
    """A host page that embeds the widget with its one script tag."""
    language = supported_language(request.GET.get("lang") or request.LANGUAGE_CODE)
    theme = "dark" if request.GET.get("theme") == "dark" else "light"
    labels = {key: ui_string(key, language) for key in ("widget_title", "demo_intro", "demo_languages")}
    context = {"language": language, "labels": labels, "theme": theme, "start_open": request.GET.get("open") == "1",
               "api_base": request.build_absolute_uri("/").rstrip("/")}
    return render(request, "demo.html", context)


# Browsers ask for /favicon.ico on every page that names none (the API docs, error pages).
favicon = RedirectView.as_view(url=static("supportdesk/favicon.svg"), permanent=True)
