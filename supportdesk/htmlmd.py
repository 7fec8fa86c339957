"""A small HTML to Markdown converter for support requests (e-mail and helpdesk HTML).

Covers what requests contain: headings, paragraphs, line breaks, lists, links,
emphasis, code and quotes. Scripts, styles and comments are dropped; unknown
tags keep their text. Whitespace is collapsed the way a browser would.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

_DROP = ("script", "style", "head", "noscript", "template")
_BLOCKS = ("p", "div", "section", "article", "table", "tr", "blockquote", "pre", "ul", "ol", "h1", "h2", "h3", "h4",
           "h5", "h6", "hr")
_SPACES = re.compile(r"[ \t\r\f\v]+")


def html_to_markdown(html: str) -> str:
    """Markdown for ``html``; plain text passes through unchanged (apart from whitespace)."""
    soup = BeautifulSoup(html or "", "html.parser")
    for tag in soup(_DROP):
        tag.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    text = _children(soup)
    lines = [line.strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _children(node: Tag) -> str:
    return "".join(_node(child) for child in node.children)


def _node(node: object) -> str:
    if isinstance(node, NavigableString):
        return _SPACES.sub(" ", str(node).replace("\n", " "))
    if not isinstance(node, Tag):
        return ""
    name = node.name
    inner = _children(node)
    if name in ("h1", "h2", "h3", "h4", "h5", "h6"):
        return f"\n\n{'#' * int(name[1])} {inner.strip()}\n\n"
    if name == "br":
        return "\n"
    if name == "hr":
        return "\n\n---\n\n"
    if name in ("strong", "b"):
        return f"**{inner.strip()}**" if inner.strip() else ""
    if name in ("em", "i"):
        return f"*{inner.strip()}*" if inner.strip() else ""
    if name == "code" and node.find_parent("pre") is None:
        return f"`{inner.strip()}`"
    if name == "pre":
        return f"\n\n```\n{node.get_text().strip(chr(10))}\n```\n\n"
    if name == "a":
        href = str(node.get("href") or "")
        label = inner.strip() or href
        return f"[{label}]({href})" if href and not href.startswith("javascript:") else label
    if name == "li":
        parent = node.find_parent(("ul", "ol"))
        if parent is not None and parent.name == "ol":
            number = 1 + sum(1 for s in node.find_previous_siblings("li"))
            return f"\n{number}. {inner.strip()}"
        return f"\n- {inner.strip()}"
    if name == "blockquote":
        quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in inner.strip().split("\n"))
        return f"\n\n{quoted}\n\n"
    if name in ("td", "th"):
        return f"{inner.strip()} "
    if name in _BLOCKS:
        return f"\n\n{inner.strip()}\n\n"
    return inner
