"""The README and the pages in ``docs/`` link to each other: every relative link names a file that
exists, and every ``#anchor`` a heading of that file (GitHub's heading ids)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target); the target ends at the first space (a title may follow) or ")".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The page without fenced code blocks (shell comments are not headings, code is not a link)."""
    return FENCE.sub("", text)


def heading_id(heading: str) -> str:
    """GitHub's id of a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    ids = set()
    for match in HEADING.finditer(_prose(path.read_text())):
        base = heading_id(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def links(path: Path) -> list[str]:
    prose = _prose(path.read_text())
    return [m.group(1) for m in LINK.finditer(CODE_SPAN.sub("", prose))]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no file {file_part}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {os.path.relpath(linked, path.parent)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `./sd run` command, step 2\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#the-sd-run-command-step-2) [ok](#page) [web](https://example.com/x#y)\n"
        "[gone](missing.md) [no anchor](other.md#nowhere) [self](#elsewhere)\n"
        "```bash\n# not a heading\n[not a link](nowhere.md)\n```\n`[code](nowhere.md)`\n"
    )
    assert broken_links(page) == [
        "missing.md: no file missing.md",
        "other.md#nowhere: no heading #nowhere in other.md",
        "#elsewhere: no heading #elsewhere in page.md",
    ]


def test_readme_fits_on_a_screen_or_two() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MAX_LINES
