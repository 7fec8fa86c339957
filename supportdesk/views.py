from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from sgr.strings import supported_language, ui_string


def demo_page(request: HttpRequest) -> HttpResponse:
    """A host page that embeds the widget with its one script tag."""
    language = supported_language(request.GET.get("lang") or request.LANGUAGE_CODE)
    theme = "dark" if request.GET.get("theme") == "dark" else "light"
    labels = {key: ui_string(key, language) for key in ("widget_title",)}
    context = {"language": language, "labels": labels, "theme": theme, "api_base": request.build_absolute_uri("/").rstrip("/")}
    return render(request, "demo.html", context)
