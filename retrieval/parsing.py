"""Turn a file's bytes into a title and heading-delimited sections (Markdown, HTML, text, PDF).

Every parser raises :class:`DocumentParseError` for a file it cannot read, so a
batch can report the file and carry on.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

# Part of every document's content hash (``retrieval.ingestion.content_hash``): change it when parsing
# or chunking changes what a document's chunks hold, and every document is parsed and embedded again on
# its next ingestion instead of being skipped as unchanged.
PARSING_VERSION = "3"  # 2: a table's data rows name their columns; 3: an HTML page's navigation and contents left out

SUPPORTED_EXTENSIONS: dict[str, str] = {
    ".md": "markdown", ".markdown": "markdown",
    ".html": "html", ".htm": "html",
    ".txt": "text", ".text": "text",
    ".pdf": "pdf",
}


class DocumentParseError(Exception):
    """The file is unsupported, undecodable or malformed."""


@dataclass
class Section:
    heading_path: list[str]
    text: str


@dataclass
class ParsedDocument:
    title: str
    sections: list[Section] = field(default_factory=list)

    @property
    def full_text(self) -> str:
        return "\n\n".join(section.text for section in self.sections)


def document_format(filename: str) -> str | None:
    """The parser name for ``filename`` by extension, or None when unsupported."""
    return SUPPORTED_EXTENSIONS.get(PurePath(filename).suffix.lower())


def document_parse(*, filename: str, content: bytes) -> ParsedDocument:
    """Parse ``content`` according to ``filename``'s extension.

    Raises DocumentParseError when the format is unsupported or the file is broken
    or has no text.
    """
    kind = document_format(filename)
    if kind is None:
        raise DocumentParseError(f"unsupported format: {PurePath(filename).suffix or '(none)'}")
    try:
        if kind == "pdf":
            parsed = _parse_pdf(content)
        else:
            text = _decode(content)
            parsed = {"markdown": _parse_markdown, "html": _parse_html, "text": _parse_text}[kind](text)
    except DocumentParseError:
        raise
    except Exception as exc:  # a parser library choking on a malformed file
        raise DocumentParseError(f"cannot parse {kind}: {type(exc).__name__}: {exc}") from exc
    parsed.sections = [s for s in parsed.sections if s.text.strip()]
    if not parsed.sections:
        raise DocumentParseError("no text found")
    # The title comes from the document, never from its file name: it is prepended to every
    # chunk before embedding, so a name like "faq_v2-final" would shift every vector.
    parsed.title = parsed.title or title_from_text(parsed.full_text)
    return parsed


TITLE_MAX = 120


def title_from_text(text: str) -> str:
    """A title for a document without one: its first line when short, else its first sentence, else a cut."""
    first_line = next((line.strip(" #*>-\t") for line in text.splitlines() if line.strip(" #*>-\t")), "")
    if len(first_line) <= TITLE_MAX:
        return first_line
    sentence = re.split(r"(?<=[.!?…])\s", first_line, maxsplit=1)[0]
    if len(sentence) <= TITLE_MAX:
        return sentence
    return first_line[:TITLE_MAX].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _decode(content: bytes) -> str:
    if b"\x00" in content[:4096]:
        raise DocumentParseError("binary content in a text format")
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentParseError(f"not UTF-8 text: {exc}") from exc


_ATX_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)|!\[([^\]]*)\]\[[^\]]*\]")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^)]*\))*\)|\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_TABLE_RULE = re.compile(r"^\s*(?=.*(?:\||---))\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")  # "|---|:-:|" or "---"


def markdown_clean(line: str) -> str:
    """Markdown markup that is noise to search and embedding removed from one line of prose.

    Links keep their text and lose their target, images keep their alt text, a
    reference definition and a table's rule line disappear, ``\\-`` becomes ``-``.
    """
    if _LINK_DEFINITION.match(line) or _TABLE_RULE.match(line):
        return ""
    line = _IMAGE.sub(lambda m: m.group(1) or m.group(2) or "", line)
    line = _LINK.sub(lambda m: m.group(1) or m.group(2), line)
    line = _AUTOLINK.sub(r"\1", line)
    return _ESCAPE.sub(r"\1", line)


def _parse_markdown(text: str) -> ParsedDocument:
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    title = ""
    first_heading = ""
    in_fence = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(Section(heading_path=[h for _, h in path], text=body))
        lines.clear()

    raw = text.splitlines()
    rows = _markdown_rows_labelled(raw)
    for index, line in enumerate(raw):
        fence = _FENCE.match(line)
        if fence:
            in_fence = not in_fence
        match = None if in_fence else _ATX_HEADING.match(line)
        if match is None:
            # Code keeps every character; prose loses link targets, image markup and escapes.
            lines.append(line if in_fence or fence else markdown_clean(rows.get(index, line)))
            continue
        flush()
        level, heading = len(match.group(1)), markdown_clean(match.group(2).strip())
        if level == 1 and not title:
            title = heading
        first_heading = first_heading or heading
        path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, heading)]
    flush()
    return ParsedDocument(title=title or first_heading, sections=sections)


def _markdown_cells(line: str) -> list[str] | None:
    """A Markdown table line's cells, or None when the line is not a table row."""
    stripped = line.strip()
    if "|" not in stripped or _FENCE.match(line):
        return None
    cells = re.split(r"(?<!\\)\|", stripped.strip("|"))
    return [" ".join(cell.split()) for cell in cells]


def _markdown_rows_labelled(raw: list[str]) -> dict[int, str]:
    """The data rows of every Markdown table with a header row (the line above its rule line), by line
    index, labelled with their column names (:func:`row_labelled`)."""
    out: dict[int, str] = {}
    for index in range(1, len(raw)):
        header = _markdown_cells(raw[index - 1]) if _TABLE_RULE.match(raw[index]) else None
        if not header:
            continue
        for row_index in range(index + 1, len(raw)):
            cells = _markdown_cells(raw[row_index])
            if cells is None or not raw[row_index].strip():
                break
            out[row_index] = row_labelled(header, cells)
    return out


# A table row is one block, its cells joined by " | ": a value stays on the line of the item it belongs
# to (cells as separate paragraphs let a reader, or a small model, take the value of the next row).
_HTML_BLOCKS = ("p", "li", "pre", "blockquote", "dt", "dd", "tr", "td", "th", "figcaption")
_HTML_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# A page's navigation bar ("Prev | Up | SQL Commands | Home | Next", a breadcrumb) and its table of contents (the
# sections' titles, each section carrying its own heading) are no part of its content: a <nav> element, an element
# with the navigation role, or one whose class names it (the DocBook manuals' ``navheader``, ``navfooter`` and
# ``toc``, ``navbar``, ``breadcrumb``). They cost a small model's context budget the lines that answer.
_HTML_NAV_CLASS = re.compile(r"^(?:nav|navheader|navfooter|navbar|navigation|breadcrumbs?|toc|table-of-contents)$",
                             re.IGNORECASE)


def _parse_html(text: str) -> ParsedDocument:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    for tag in soup(["script", "style", "nav", "noscript", "template"]):
        tag.decompose()
    for tag in [*soup.find_all(True, attrs={"role": "navigation"}), *soup.find_all(True, class_=_HTML_NAV_CLASS)]:
        if not tag.decomposed:
            tag.decompose()
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(Section(heading_path=[h for _, h in path], text=body))
        lines.clear()

    root = soup.body or soup
    first_heading = ""
    term: int | None = None  # the line of the definition term a following <dd> joins
    for element in root.find_all([*_HTML_HEADINGS, *_HTML_BLOCKS]):
        if element.name in _HTML_HEADINGS:
            flush()
            level, heading = int(element.name[1]), element.get_text(" ", strip=True)
            if level == 1 and not title:
                title = heading
            first_heading = first_heading or heading
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, heading)]
        elif element.find_parent(_HTML_BLOCKS) is None:  # nested blocks are inside their parent's text
            block = _block_text(element)
            if block and element.name == "dd" and term is not None and lines[term:] == [lines[term], ""]:
                # A definition starts with its term ("work_mem (integer): Sets ..."): a value in it stays
                # with the name it belongs to, as a table row's does.
                lines[term:] = [f"{lines[term]}: {block}", ""]
                term = None
            elif block:
                term = len(lines) if element.name == "dt" else None
                lines.append(("- " if element.name == "li" else "") + block)
                if element.name not in ("li", "tr"):
                    lines.append("")
    flush()
    if not sections:  # no block markup at all: take the visible text
        body = root.get_text("\n", strip=True)
        sections = [Section(heading_path=[], text=body)] if body else []
    return ParsedDocument(title=title or first_heading, sections=sections)


def _block_text(element: Any) -> str:
    """A block's text on one line (a paragraph's source line breaks are not the text's); code keeps its lines."""
    if element.name == "tr":
        return _row_text(element)
    text = element.get_text(" ", strip=True)
    return text if element.name == "pre" else " ".join(text.split())


def _row_text(row: Any) -> str:
    """A table row as one line: its cells' texts joined by " | " (empty cells kept, so columns line up),
    each labelled with its column's header when the table has a header row (:func:`row_labelled`)."""
    cells = row.find_all(["td", "th"], recursive=False)
    texts = [" ".join(cell.get_text(" ", strip=True).split()) for cell in cells]
    table = row.find_parent("table")
    first = table.find("tr") if table is not None else None
    if first is not None and first is not row and all(cell.name == "td" for cell in cells[1:]):
        header = first.find_all(["td", "th"], recursive=False)
        if header and all(cell.name == "th" for cell in header):
            return row_labelled([" ".join(cell.get_text(" ", strip=True).split()) for cell in header], texts)
    return " | ".join(texts).strip(" |")


def row_labelled(header: list[str], cells: list[str]) -> str:
    """A table's data row as one self-describing line: ``Plan: Business | Seats: 25 | Price: 49 EUR``.

    A value keeps the name of what it is on its own line, so neither a reader nor a small model has to
    count columns up to a header rows away (the "right row, wrong column" error), and grounding finds
    the value beside the word it answers. Rows that do not line up with the header (merged cells) and
    cells without a header name stay as they are.
    """
    if len(header) != len(cells):
        return " | ".join(cells).strip(" |")
    return " | ".join(f"{name}: {cell}" if name and cell else cell for name, cell in zip(header, cells, strict=True)
                      ).strip(" |")


def _parse_text(text: str) -> ParsedDocument:
    return ParsedDocument(title=title_from_text(text), sections=[Section(heading_path=[], text=text.strip())])


def _parse_pdf(content: bytes) -> ParsedDocument:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(content), strict=False)
    metadata_title = (reader.metadata.title if reader.metadata else None) or ""
    sections = []
    for number, page in enumerate(reader.pages, start=1):
        text = (page.extract_text() or "").strip()
        if text:
            sections.append(Section(heading_path=[f"Page {number}"], text=text))
    return ParsedDocument(title=str(metadata_title).strip(), sections=sections)
