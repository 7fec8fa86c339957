"""Markdown to HTML that is safe to insert (answers, staff replies): rendered by python-markdown, then cleaned by nh3.

Raw HTML in the model's text is escaped before rendering, and nh3 keeps only
formatting tags, ``href`` on links (http, https, mailto) and no event handlers,
so a prompt-injected ``<script>`` or ``onerror=`` never reaches the page.
"""

from __future__ import annotations

import html

import markdown
import nh3

ALLOWED_TAGS = {
    "p", "br", "strong", "em", "b", "i", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "hr", "table", "thead", "tbody", "tr", "th", "td",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}}
URL_SCHEMES = {"http", "https", "mailto"}


def answer_html(text: str) -> str:
    rendered = markdown.markdown(html.escape(text, quote=False), extensions=["fenced_code", "tables", "sane_lists"])
    return nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
