from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from sgr.strings import supported_language, ui_string


def demo_page(request: HttpRequest) -> HttpResponse:
    language = supported_language(request.GET.get("lang") or request.LANGUAGE_CODE)
    labels = {key: ui_string(key, language) for key in ("widget_title", "widget_placeholder", "widget_send")}
    return render(request, "demo.html", {"language": language, "labels": labels})
