"""answer_html: Markdown to safe HTML, with one renderer per thread kept between answers."""

from __future__ import annotations

import threading

import nh3

from supportdesk.markup import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, URL_SCHEMES, answer_html, markdown_safe

TEXTS = [
    "Open **Settings** and choose *Reset password* [1].",
    "Steps:\n\n1. Open the page\n2. Click reset\n\n```\ncode <here>\n```",
    "| plan | price |\n|---|---|\n| basic | 5 |",
    "A [link](https://example.com), a [bad one](javascript:alert(1)) and <script>alert(1)</script>",
    "A plain line after a fence: nothing the renderer stashed from an earlier text may come back.",
]


def _rendered_anew(text: str) -> str:
    """What a renderer built for this text alone gives (the code before renderers were kept)."""
    rendered = markdown_safe().convert(text)
    return nh3.clean(rendered, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer nofollow", strip_comments=True)


def test_a_kept_renderer_renders_each_text_as_a_new_one_would():
    for text in TEXTS * 2:  # one renderer, one text after another
        assert answer_html(text) == _rendered_anew(text)
    assert "<pre><code>code &lt;here&gt;" in answer_html(TEXTS[1])
    assert "<script>" not in answer_html(TEXTS[3]) and "javascript:" not in answer_html(TEXTS[3])


def test_tags_show_as_text_once_escaped_in_prose_and_code_and_a_quote_is_a_quote():
    # The widget answer's own tag, in code: shown as written (it was escaped twice: "&lt;script" on screen).
    assert answer_html("Add `<script src=\"w.js\" defer></script>` [1].") == (
        '<p>Add <code>&lt;script src="w.js" defer&gt;&lt;/script&gt;</code> [1].</p>')
    assert answer_html("```html\n<script src=\"w.js\"></script>\n```") == (
        '<pre><code>&lt;script src="w.js"&gt;&lt;/script&gt;\n</code></pre>')
    # A line quoted from an article (ANSWER_QUOTE_FIRST) is a quote, not "&gt; …" text.
    assert answer_html("> The default is 100 connections. [1]") == (
        "<blockquote>\n<p>The default is 100 connections. [1]</p>\n</blockquote>")
    # Raw HTML, as a block or inline, is text; an entity stays an entity (shown as its character, never a tag).
    assert answer_html("<div onclick=\"x()\">\nhi\n</div> <img src=x onerror=alert(1)> a & b &lt;i&gt;") == (
        '<p>&lt;div onclick="x()"&gt;\nhi\n&lt;/div&gt; &lt;img src=x onerror=alert(1)&gt; a &amp; b &lt;i&gt;</p>')


def test_each_thread_renders_with_its_own_renderer():
    results: dict[int, list[str]] = {}

    def render(number: int) -> None:
        results[number] = [answer_html(text) for text in TEXTS * 20]

    threads = [threading.Thread(target=render, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [_rendered_anew(text) for text in TEXTS * 20]
    assert len(results) == 4 and all(rendered == expected for rendered in results.values())
