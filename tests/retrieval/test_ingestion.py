"""Ingestion: every format, heading paths, full-text config, idempotency, --prune, broken files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from retrieval.ingestion import document_ingest, document_ingest_file, kb_ingest_paths
from retrieval.models import Chunk, Document
from tests.retrieval.conftest import make_pdf

pytestmark = pytest.mark.django_db

MARKDOWN = """# Billing guide

Intro paragraph about invoices.

## Refunds

Refunds are paid back to the original card within ten days.

### Partial refunds

A partial refund covers only the returned items.

```
# not a heading inside code
```
"""

HTML = """<html><head><title>Shipping help</title><script>var x = 1;</script></head><body>
<h1>Shipping</h1><p>We ship worldwide from our warehouse.</p>
<h2>Customs</h2><p>Customs duties are paid by the recipient.</p><ul><li>EU: no duties</li></ul>
</body></html>"""

RUSSIAN_TEXT = "Возврат товара\n\nТовары можно вернуть в течение тридцати дней после доставки."


def _chunks(source_name: str) -> list[Chunk]:
    document = Document.objects.get(source__endswith=source_name)
    return list(document.chunks.order_by("position"))


def test_markdown_follows_headings_and_keeps_the_heading_path(stub_embedder, write_files):
    root = write_files({"billing.md": MARKDOWN})
    report = kb_ingest_paths(paths=[str(root)])
    assert [o.status for o in report.outcomes] == ["created"]
    document = Document.objects.get()
    assert document.title == "Billing guide"
    assert document.status == Document.Status.READY and document.version == 1
    assert document.embedder == "openai:stub-embed"
    paths = [c.heading_path for c in _chunks("billing.md")]
    assert paths == ["Billing guide", "Billing guide > Refunds", "Billing guide > Refunds > Partial refunds"]
    assert "# not a heading inside code" in _chunks("billing.md")[-1].text
    assert all(c.embedding is not None and len(c.embedding) == 384 for c in _chunks("billing.md"))
    assert document.chunk_count == 3


def test_html_text_and_pdf_are_ingested(stub_embedder, write_files):
    pdf = make_pdf(["Warranty covers two years of use.", "Claims need the receipt."], title="Warranty terms")
    root = write_files({"shipping.html": HTML, "returns.txt": RUSSIAN_TEXT, "warranty.pdf": pdf})
    report = kb_ingest_paths(paths=[str(root)])
    assert sorted(o.status for o in report.outcomes) == ["created"] * 3

    html = _chunks("shipping.html")
    assert Document.objects.get(source__endswith="shipping.html").title == "Shipping help"
    assert [c.heading_path for c in html] == ["Shipping", "Shipping > Customs"]
    assert "var x" not in " ".join(c.text for c in html)
    assert "- EU: no duties" in html[1].text

    text = Document.objects.get(source__endswith="returns.txt")
    assert text.title == "Возврат товара" and text.language == "ru"
    assert {c.ts_config for c in _chunks("returns.txt")} == {"russian"}

    pdf_doc = Document.objects.get(source__endswith="warranty.pdf")
    assert pdf_doc.title == "Warranty terms"
    assert [c.heading_path for c in _chunks("warranty.pdf")] == ["Page 1", "Page 2"]
    assert "two years" in _chunks("warranty.pdf")[0].text


def test_full_text_vector_uses_the_chunks_language_configuration(stub_embedder, write_files):
    root = write_files({"returns.txt": RUSSIAN_TEXT, "billing.md": MARKDOWN})
    kb_ingest_paths(paths=[str(root)])
    # The russian stemmer maps "возвраты" and "возврат" to one lexeme; simple would not.
    stemmed = Chunk.objects.filter(search_vector__isnull=False).extra(
        where=["search_vector @@ plainto_tsquery('russian', %s)"], params=["возвраты"])
    assert [c.document.source.endswith("returns.txt") for c in stemmed] == [True]
    english = Chunk.objects.extra(where=["search_vector @@ plainto_tsquery('english', %s)"], params=["refunding"])
    assert english.count() >= 1 and all(c.ts_config == "english" for c in english)


def test_unchanged_files_are_skipped_changed_ones_replaced(stub_embedder, write_files):
    root = write_files({"billing.md": MARKDOWN, "returns.txt": RUSSIAN_TEXT})
    kb_ingest_paths(paths=[str(root)])
    old_ids = set(Chunk.objects.values_list("id", flat=True))
    embed_calls = len([r for r in stub_embedder.requests if r.path.endswith("/embeddings")])

    again = kb_ingest_paths(paths=[str(root)])
    assert [o.status for o in again.outcomes] == ["unchanged", "unchanged"]
    assert len([r for r in stub_embedder.requests if r.path.endswith("/embeddings")]) == embed_calls
    assert set(Chunk.objects.values_list("id", flat=True)) == old_ids

    (root / "billing.md").write_text("# Billing guide\n\nInvoices are emailed monthly.\n", encoding="utf-8")
    changed = kb_ingest_paths(paths=[str(root)])
    assert sorted(o.status for o in changed.outcomes) == ["unchanged", "updated"]
    billing = Document.objects.get(source__endswith="billing.md")
    assert billing.version == 2 and billing.chunk_count == 1
    assert [c.text for c in billing.chunks.all()] == ["Invoices are emailed monthly."]
    assert Chunk.objects.filter(document__source__endswith="returns.txt", id__in=old_ids).exists()


def test_a_new_parsing_version_parses_unchanged_files_again(stub_embedder, write_files, monkeypatch):
    folder = write_files({"plans.md": "# Plans\n\n| Plan | Seats |\n|---|---|\n| Business | 25 |\n"})
    kb_ingest_paths(paths=[str(folder)])
    assert [o.status for o in kb_ingest_paths(paths=[str(folder)]).outcomes] == ["unchanged"]
    monkeypatch.setattr("retrieval.ingestion.PARSING_VERSION", "next")
    assert [o.status for o in kb_ingest_paths(paths=[str(folder)]).outcomes] == ["updated"]
    assert [o.status for o in kb_ingest_paths(paths=[str(folder)]).outcomes] == ["unchanged"]
    assert "Plan: Business | Seats: 25" in _chunks("plans.md")[0].text


def test_switching_embedder_reingests_unchanged_files(stub_embedder, write_files, settings):
    root = write_files({"billing.md": MARKDOWN})
    kb_ingest_paths(paths=[str(root)])
    settings.RETRIEVAL_EMBEDDING_MODEL = "another-model"
    outcome = kb_ingest_paths(paths=[str(root)]).outcomes[0]
    assert outcome.status == "updated"
    assert Document.objects.get().embedder == "openai:another-model"
    assert Document.objects.get().version == 1  # same content, same version


def test_prune_removes_documents_whose_file_is_gone(stub_embedder, write_files):
    root = write_files({"keep.md": "# Keep\n\nStays.", "gone.md": "# Gone\n\nWill be deleted."})
    call_command("ingest_kb", str(root), "--no-progress", stdout=io.StringIO())
    (root / "gone.md").unlink()
    out = io.StringIO()
    call_command("ingest_kb", str(root), "--prune", "--no-progress", stdout=out)
    assert "pruned 1" in out.getvalue() and "unchanged 1" in out.getvalue()
    assert [d.title for d in Document.objects.all()] == ["Keep"]
    assert not Chunk.objects.filter(document__title="Gone").exists()


def test_prune_judges_only_the_folders_it_was_given(stub_embedder, write_files, tmp_path):
    """A document ingested from another folder, or on another host (its path is that host's, missing
    here), is not deleted by a prune of this folder."""
    root = write_files({"gone.md": "# Gone\n\nWill be deleted."})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "other.md").write_text("# Other folder\n\nStays.")
    kb_ingest_paths(paths=[str(root), str(elsewhere)])
    (elsewhere / "other.md").unlink()  # gone too, but not under the folder pruned below
    document_ingest(source="/srv/another-host/kb/faq.md", filename="faq.md", content=b"# Another host\n\nStays.")
    (root / "gone.md").unlink()
    report = kb_ingest_paths(paths=[str(root)], prune=True)
    assert [o.status for o in report.outcomes] == ["pruned"]
    assert sorted(d.title for d in Document.objects.all()) == ["Another host", "Other folder"]
    report = kb_ingest_paths(paths=[f"{elsewhere}/**/*.md"], prune=True)  # a glob prunes under its folder
    assert [o.status for o in report.outcomes] == ["pruned"]
    assert [d.title for d in Document.objects.all()] == ["Another host"]


def test_without_prune_missing_files_stay(stub_embedder, write_files):
    root = write_files({"gone.md": "# Gone\n\nStill here."})
    kb_ingest_paths(paths=[str(root)])
    (root / "gone.md").unlink()
    report = kb_ingest_paths(paths=[str(root)])
    assert report.outcomes == [] and Document.objects.count() == 1


def test_a_broken_file_is_reported_and_the_batch_goes_on(stub_embedder, write_files):
    root = write_files({
        "a-good.md": "# Good\n\nFine content.",
        "b-broken.pdf": b"%PDF-1.4\nthis is not really a pdf",
        "c-binary.txt": b"\x00\x01\x02\xff\xfe",
        "d-empty.md": "   \n",
        "e-good.txt": "Plain text that is fine.",
    })
    report = kb_ingest_paths(paths=[str(root)])
    status = {Path(o.source).name: o.status for o in report.outcomes}
    assert status == {"a-good.md": "created", "b-broken.pdf": "failed", "c-binary.txt": "failed",
                      "d-empty.md": "failed", "e-good.txt": "created"}
    assert all(o.error for o in report.outcomes if o.status == "failed")
    assert Document.objects.count() == 2


def test_explicit_missing_or_unsupported_files_are_reported(stub_embedder, write_files, tmp_path):
    root = write_files({"notes.docx": b"PK\x03\x04", "ok.md": "# Ok\n\nYes."})
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_kb", str(root / "notes.docx"), str(tmp_path / "missing.md"), str(root / "*.md"),
                 "--no-progress", stdout=out, stderr=err)
    assert "created 1" in out.getvalue() and "failed 2" in out.getvalue()
    assert "unsupported format: .docx" in err.getvalue() and "missing.md" in err.getvalue()


def test_folder_walk_ignores_unsupported_files(stub_embedder, write_files):
    root = write_files({"sub/deep/a.md": "# A\n\nText.", "image.png": b"\x89PNG", "b.htm": "<p>Hello</p>"})
    report = kb_ingest_paths(paths=[str(root)])
    assert sorted(Path(o.source).name for o in report.outcomes) == ["a.md", "b.htm"]


def test_embedder_failure_keeps_the_previous_version_searchable(stub_embedder, write_files):
    root = write_files({"billing.md": MARKDOWN})
    kb_ingest_paths(paths=[str(root)])
    (root / "billing.md").write_text("# Billing guide\n\nNew text.", encoding="utf-8")
    stub_embedder.route("/v1/embeddings", lambda body: (500, {"error": {"message": "down"}}))
    outcome = document_ingest_file(path=root / "billing.md")
    assert outcome.status == "failed" and "InternalServerError" in outcome.error
    document = Document.objects.get()
    assert document.chunk_count == 3 and Chunk.objects.count() == 3
    assert document.status == Document.Status.READY and "InternalServerError" in document.error


def test_titles_come_from_the_document_never_the_file_name(stub_embedder, write_files):
    long_line = ("This guide explains every step of moving an account between regions. " * 4).strip()
    root = write_files({
        "faq_v2-final.txt": f"{long_line}\n\nMore text.",
        "notes_2024.md": "Some intro without a heading.\n\n## Exports\n\nExports run nightly.",
        "plain.html": "<p>Opening hours are nine to five.</p>",
        "short-first.txt": "Opening hours\n\nWe open at nine.",
    })
    kb_ingest_paths(paths=[str(root)])
    titles = {Path(d.source).name: d.title for d in Document.objects.all()}
    assert titles == {
        "faq_v2-final.txt": "This guide explains every step of moving an account between regions.",
        "notes_2024.md": "Exports",
        "plain.html": "Opening hours are nine to five.",
        "short-first.txt": "Opening hours",
    }


def test_markdown_chunks_keep_link_text_and_lose_targets_images_and_escapes(stub_embedder, write_files):
    root = write_files({"links.md": (
        "# Links\n\nSee [the billing page](https://example.test/billing \"Billing\") and [docs][1].\n"
        "![Screenshot of the settings](img/settings.png) Step 1\\. Open \\-settings\\- \\*now\\*.\n"
        "Mail <mailto:help@example.test>.\n\n[1]: https://example.test/docs\n\n"
        "```\nkeep [raw](code) \\- here\n```\n")})
    kb_ingest_paths(paths=[str(root)])
    text = "\n".join(c.text for c in _chunks("links.md"))
    assert "See the billing page and docs." in text
    assert "Screenshot of the settings Step 1. Open -settings- *now*." in text
    assert "Mail mailto:help@example.test." in text
    assert "https://example.test" not in text and "img/settings.png" not in text and "[1]" not in text
    assert "keep [raw](code) \\- here" in text  # code is kept as written


def _ingested_lines(write_files, name: str, page: str) -> list[str]:
    kb_ingest_paths(paths=[str(write_files({name: page}))])
    return " ".join(c.text for c in _chunks(name)).splitlines()


def test_an_html_table_row_stays_one_line_so_a_value_keeps_its_item(stub_embedder, write_files):
    """Cells as separate paragraphs let a reader take the value of the next row (the limits-table failure)."""
    page = ("<html><body><h1>Limits</h1><table><tr><th>Item</th><th>Upper Limit</th><th>Comment</th></tr>"
            "<tr><td>columns per table</td><td>1,600</td><td>further limited\n  by tuple size</td></tr>"
            "<tr><td>columns in a result set</td><td>1,664</td><td></td></tr></table></body></html>")
    lines = _ingested_lines(write_files, "limits.html", page)
    assert "Item | Upper Limit | Comment" in lines
    # Each data row names its columns: the value stands beside what it is.
    assert "Item: columns per table | Upper Limit: 1,600 | Comment: further limited by tuple size" in lines
    assert "Item: columns in a result set | Upper Limit: 1,664" in lines


def test_a_table_row_without_a_header_or_with_merged_cells_is_not_labelled(stub_embedder, write_files):
    page = ("<html><body><h1>Plans</h1><table><tr><td>Basic</td><td>5 seats</td></tr></table>"
            "<table><tr><th>Plan</th><th>Seats</th><th>Price</th></tr>"
            "<tr><td colspan='2'>Enterprise: ask us</td><td>custom</td></tr></table></body></html>")
    lines = _ingested_lines(write_files, "plans.html", page)
    assert "Basic | 5 seats" in lines and "Enterprise: ask us | custom" in lines


def test_a_markdown_table_row_names_its_columns_and_code_is_left_alone(stub_embedder, write_files):
    page = ("# Plans\n\n| Plan | Seats | Price |\n|---|:--:|---|\n| Business | 25 | 49 EUR |\n"
            "| [Team](https://example.test/team) | 5 | 12 EUR |\n\nAfter the table.\n\n"
            "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n")
    lines = _ingested_lines(write_files, "plans.md", page)
    assert "Plan: Business | Seats: 25 | Price: 49 EUR" in lines
    assert "Plan: Team | Seats: 5 | Price: 12 EUR" in lines  # link target dropped as in prose
    assert "After the table." in lines and "| 1 | 2 |" in lines  # prose and code unchanged


def test_an_html_definition_starts_with_its_term(stub_embedder, write_files):
    page = ("<html><body><h1>Autovacuum</h1><dl><dt>autovacuum_vacuum_threshold (integer)</dt>"
            "<dd><p>Minimum number of updated tuples.\n The default is 50 tuples.</p></dd>"
            "<dt>autovacuum_vacuum_insert_threshold (integer)</dt><dd><p>The default is 1000 tuples.</p></dd></dl>"
            "<pre>vacuum\n  analyze</pre></body></html>")
    kb_ingest_paths(paths=[str(write_files({"autovacuum.html": page}))])
    lines = " ".join(c.text for c in _chunks("autovacuum.html")).splitlines()
    assert ("autovacuum_vacuum_threshold (integer): Minimum number of updated tuples. The default is 50 tuples."
            in lines)
    assert "autovacuum_vacuum_insert_threshold (integer): The default is 1000 tuples." in lines
    assert "  analyze" in lines  # code keeps its lines


def test_an_html_page_s_navigation_bars_are_left_out(stub_embedder, write_files):
    page = ("<html><head><title>VACUUM</title></head><body>"
            '<div class="navheader"><table><tr><th colspan="3">VACUUM</th></tr><tr><td><a href="a.html">Prev</a></td>'
            '<th>SQL Commands</th><td><a href="b.html">Next</a></td></tr></table></div>'
            '<ol class="Breadcrumb"><li><a href="/">Docs</a></li><li>Commands</li></ol>'
            '<div role="navigation"><p>Jump to: Reference</p></div>'
            '<h1>VACUUM</h1><div class="toc"><dl class="toc"><dt><a href="#notes">Notes on freezing</a></dt></dl></div>'
            "<p>VACUUM reclaims storage occupied by dead tuples.</p><h2>Notes on freezing</h2><p>Freezing marks rows.</p>"
            '<div class="navfooter"><table><tr><td><a href="a.html">Prev</a></td><td>Home</td></tr></table></div>'
            "</body></html>")
    kb_ingest_paths(paths=[str(write_files({"vacuum.html": page}))])
    text = " ".join(c.text for c in _chunks("vacuum.html"))
    assert "VACUUM reclaims storage occupied by dead tuples." in text and "Freezing marks rows." in text
    for bar in ("Prev", "Next", "Home", "SQL Commands", "Docs", "Jump to"):
        assert bar not in text
    # The contents' entry is gone; the section keeps its own heading.
    assert [c.heading_path for c in _chunks("vacuum.html") if "Notes on freezing" in c.text] == []
    assert any("Notes on freezing" in c.heading_path for c in _chunks("vacuum.html"))
