"""The demo knowledge base: Markdown documents about SupportDesk itself, in English and Russian."""

from __future__ import annotations

from pathlib import Path

DEMO_KB_DIR = Path(__file__).resolve().parent / "demo_kb"
