"""manage.py process_requests_xlsx: the same pipeline per row, atomic output, resume, a failing row."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from openpyxl import Workbook, load_workbook

import supportdesk.batch
from supportdesk.batch import request_text
from supportdesk.htmlmd import html_to_markdown
from supportdesk.models import Turn

pytestmark = pytest.mark.django_db(transaction=True)

ROWS = [
    ("r1", "Password", "<p>How do I <b>reset</b> my password?</p>"),
    ("r2", "", ""),  # nothing to ask: this row fails, the batch goes on
    ("r3", "Invoice", "<div>Where is my invoice?<br>Thanks</div>"),
    ("r4", "Refund", "<ul><li>order 42</li><li>damaged</li></ul>"),
]


def _input(tmp_path: Path) -> Path:
    workbook = Workbook()
    sheet = workbook.active
    sheet.append(["ticket", "title", "body", "other"])
    for row in ROWS:
        sheet.append([*row, "ignored"])
    path = tmp_path / "in.xlsx"
    workbook.save(path)
    return path


def _output(path: Path) -> dict[str, dict]:
    rows = list(load_workbook(path).active.iter_rows(values_only=True))
    return {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}


def _run(source: Path, target: Path, *extra: str) -> str:
    out = io.StringIO()
    call_command("process_requests_xlsx", "--input", str(source), "--output", str(target), "--id-col", "ticket",
                 "--subject-col", "title", "--html-col", "body", *extra, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_request_text_is_subject_heading_plus_markdown() -> None:
    assert request_text(subject="Invoice", html="<p>Where is <em>it</em>?</p><ol><li>a</li><li>b</li></ol>") == (
        "# Invoice\n\nWhere is *it*?\n\n1. a\n2. b"
    )
    assert html_to_markdown('<a href="https://example.org/x">doc</a><script>x()</script>') == "[doc](https://example.org/x)"


@pytest.mark.worker
def test_rows_run_through_the_pipeline_then_resume_after_an_interruption(llm, celery_worker, tmp_path, monkeypatch) -> None:
    source, target = _input(tmp_path), tmp_path / "out" / "results.xlsx"
    real = supportdesk.batch.row_process
    calls: list[str] = []

    def interrupted(request, **kwargs):  # the operator presses Ctrl-C while the third row runs
        calls.append(request.id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(request, **kwargs)

    monkeypatch.setattr(supportdesk.batch, "row_process", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(source, target)
    first = _output(target)  # written even though the run was interrupted
    assert set(first) == {"r1", "r2"}
    assert first["r1"]["status"] == "done" and first["r1"]["final_action"] == "normal"
    assert first["r1"]["answer"] == llm.answer_text
    assert first["r1"]["user_intent"] == llm.plan_args["user_intent"]
    assert first["r1"]["spam_score"] == llm.plan_args["spam_score"]
    assert first["r1"]["confidence"] == llm.plan_args["intent_confidence"]
    assert first["r2"]["status"] == "failed" and first["r2"]["error"].startswith("rejected: ")
    assert Turn.objects.count() == 1
    sent = [r for r in llm.requests if r.body.get("tool_choice")]
    assert "# Password\n\nHow do I **reset** my password?" in sent[0].body["messages"][-1]["content"]

    monkeypatch.setattr(supportdesk.batch, "row_process", real)
    summary = _run(source, target, "--concurrency", "2")
    assert summary.startswith("4 selected, 1 already done, 2 done now, 1 failed")
    assert Turn.objects.count() == 3  # r1 was not asked again; r2 cannot be asked
    final = _output(target)
    assert list(final) == ["r1", "r2", "r3", "r4"]
    assert [final[k]["status"] for k in final] == ["done", "failed", "done", "done"]
    assert final["r3"]["final_action"] == "normal" and final["r4"]["answer"] == llm.answer_text
    assert not [p for p in target.parent.iterdir() if p.name != "results.xlsx"]  # no temporary files left


def test_start_limit_and_a_missing_column(tmp_path, monkeypatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(supportdesk.batch, "row_process",
                        lambda request, **kw: seen.append(request.id) or {"id": request.id, "status": "done"})
    source = _input(tmp_path)
    _run(source, tmp_path / "o.xlsx", "--start", "1", "--limit", "2")
    assert seen == ["r2", "r3"]
    with pytest.raises(CommandError, match="--html-col: no column named 'html'"):
        call_command("process_requests_xlsx", "--input", str(source), "--output", str(tmp_path / "x.xlsx"),
                     "--id-col", "ticket", "--subject-col", "title", stdout=io.StringIO(), stderr=io.StringIO())
