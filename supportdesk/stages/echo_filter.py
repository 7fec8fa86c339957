"""Keep the plan's analysis out of the customer's answer (DT-004).

The answering model's context ends with the synthetic ``## Analysis`` + ``## Response``
message. Small models often start their answer by copying it. This filter sits on the
token stream: it holds text back while it could still be such a copy, drops a copy
(exact, or any leading block that starts with ``## Analysis`` up to the end of its
``## Response`` line), and passes everything else through unchanged.
"""

from __future__ import annotations

ANALYSIS_HEADING = "## Analysis"
RESPONSE_HEADING = "## Response"


class AnalysisEchoFilter:
    def __init__(self, synthetic: str) -> None:
        self.synthetic = synthetic.strip()
        self.pending = ""
        self.passing = False  # decided: everything from now on goes straight through

    def feed(self, delta: str) -> str:
        """The part of ``delta`` (plus anything held back) that may be shown now."""
        if self.passing:
            return delta
        self.pending += delta
        head = self.pending.lstrip()
        if not head:
            return ""
        could_be_echo = (self.synthetic and self.synthetic.startswith(head)) or ANALYSIS_HEADING.startswith(head)
        if could_be_echo:
            return ""  # not decided yet: hold
        if self.synthetic and head.startswith(self.synthetic):
            return self._pass(head[len(self.synthetic):])
        if head.startswith(ANALYSIS_HEADING):
            return self._skip_analysis_block(head)
        return self._pass(self.pending)

    def finish(self) -> str:
        """Whatever is still held when the stream ends (an unfinished copy is dropped)."""
        if self.passing:
            return ""
        head = self.pending.lstrip()
        self.pending = ""
        if head.startswith(ANALYSIS_HEADING) or (self.synthetic and self.synthetic.startswith(head)):
            return ""
        return head

    def _skip_analysis_block(self, head: str) -> str:
        # Drop through the response heading and the one paragraph under it (the echoed response).
        at = head.find(RESPONSE_HEADING)
        if at < 0:
            return ""
        after = head[at + len(RESPONSE_HEADING):]
        end = after.find("\n\n", 1)
        if end < 0:
            return ""
        return self._pass(after[end:])

    def _pass(self, text: str) -> str:
        self.passing = True
        self.pending = ""
        return text.lstrip()
