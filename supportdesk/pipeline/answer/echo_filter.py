"""Keep the plan's internal sections out of the customer's answer (DT-004), for every model.

The answering model's context ends with the synthetic ``## Analysis`` + ``## Response``
message. Models, small ones most, copy it: the whole block, a reworded block, a bare
``## Response`` heading before the real answer, or single analysis lines with scores.
This filter sits on the token stream and works line by line:

- an ``Analysis`` heading (``## Analysis``, ``**Analysis**``, ``Analysis:``, Russian
  ``Анализ``) starts a block that is dropped through its ``Response`` heading and the
  one paragraph under it (the echoed response);
- a ``Response`` heading on its own is dropped, the text under it is the answer;
- a line equal to a line of the synthetic message is dropped wherever it appears.

A partial line is shown as soon as it can no longer become one of those, so ordinary
text streams with no visible delay; :func:`answer_text_clean` applies the same rules
to a whole text before it is stored or returned by the API.
"""

from __future__ import annotations

ANALYSIS_WORDS = ("analysis", "анализ")
RESPONSE_WORDS = ("response", "ответ")
MARKUP = "#*_ \t"
MIN_ECHO_LINE = 8  # shorter synthetic lines ("- none") are too common to drop from an answer

NORMAL, ANALYSIS, ECHO = "normal", "analysis", "echo"


def _norm(line: str) -> str:
    return " ".join(line.lower().split())


def _core(line: str) -> str:
    return line.strip().lower().lstrip(MARKUP).rstrip()


def _heading_of(line: str) -> str | None:
    """``analysis`` / ``response`` when the whole line is such a heading, else ``None``."""
    core = _core(line).rstrip("*_: \t").strip()
    if core in ANALYSIS_WORDS:
        return ANALYSIS
    if core in RESPONSE_WORDS:
        return "response"
    return None


def _could_be_heading(partial: str) -> bool:
    core = _core(partial)
    if not core:
        return True  # markup only, so far
    for word in (*ANALYSIS_WORDS, *RESPONSE_WORDS):
        if word.startswith(core) or (core.startswith(word) and not core[len(word):].strip("*_: \t")):
            return True
    return False


class AnalysisEchoFilter:
    def __init__(self, synthetic: str) -> None:
        self.echo_lines = {
            _norm(line) for line in synthetic.splitlines()
            if len(_norm(line)) >= MIN_ECHO_LINE and _heading_of(line) is None
        }
        self.mode = NORMAL
        self.line = ""  # the current line, not yet complete
        self.line_shown = False  # part of the current line already went out
        self.shown_any = False  # anything at all went out (leading blank lines are dropped)
        self.echo_text_seen = False

    def feed(self, delta: str) -> str:
        """The part of ``delta`` (plus anything held back) that may be shown now."""
        out: list[str] = []
        for ch in delta:
            if ch == "\n":
                out.append(self._line_end())
                continue
            self.line += ch
            if self.line_shown:
                out.append(ch)
            elif self.mode == NORMAL and self.line.strip() and not self._droppable_prefix(self.line):
                out.append(self._show(self.line))
        return "".join(out)

    def finish(self) -> str:
        """Whatever is still held when the stream ends (an unfinished heading or copy is dropped)."""
        line, shown = self.line, self.line_shown
        self.line, self.line_shown = "", False
        if shown or not line.strip() or self.mode != NORMAL or self._droppable_prefix(line):
            return ""
        return self._show(line)

    def _droppable_prefix(self, partial: str) -> bool:
        if _could_be_heading(partial):
            return True
        norm = _norm(partial)
        return any(echo.startswith(norm) for echo in self.echo_lines)

    def _show(self, text: str) -> str:
        if not self.shown_any:
            text = text.lstrip()
        self.shown_any = True
        self.line_shown = True
        return text

    def _line_end(self) -> str:
        line, shown = self.line, self.line_shown
        self.line, self.line_shown = "", False
        if shown:
            return "\n"
        heading = _heading_of(line)
        if heading == ANALYSIS:
            self.mode = ANALYSIS
            return ""
        if self.mode == ANALYSIS:
            if heading == "response":
                self.mode, self.echo_text_seen = ECHO, False
            return ""
        if heading == "response":
            return ""
        if self.mode == ECHO:
            # The paragraph under an echoed block's response heading is the echoed response.
            if line.strip():
                self.echo_text_seen = True
            elif self.echo_text_seen:
                self.mode = NORMAL
            return ""
        if not line.strip():
            return "\n" if self.shown_any else ""
        if _norm(line) in self.echo_lines:
            return ""
        self.line_shown = False
        text = self._show(line) + "\n"
        self.line_shown = False
        return text


def answer_text_clean(*, text: str, synthetic: str) -> str:
    """``text`` without internal sections, by the same rules as the stream (idempotent)."""
    echo = AnalysisEchoFilter(synthetic)
    return (echo.feed(text) + echo.finish()).strip()
