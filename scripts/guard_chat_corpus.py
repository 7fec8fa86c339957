"""Everyday chat lines for the guardian's evaluation, taken at evaluation time from the installed
package ``chatterbot-corpus`` (BSD; a dev dependency): small-talk conversations in English and
Russian written by that project's contributors, so the screen's false flags on chat are measured
on text this project did not write. Nothing of the corpus is copied into the repository.

    python scripts/guard_chat_corpus.py [FILE]    # writes FILE (default .data/guard-chat-corpus.jsonl)

then ``./sd bench manage.py evaluate_guard --file FILE`` (``GUARD_JUDGE=off`` to count the screen's
flags alone). Every line of every conversation (both speakers: a customer types both kinds) is one
``safe`` text of category ``chat``; its source is the corpus file (``chat_corpus/emotion``); reference
files (tech support, trivia, coding) are left out, and so are exact repeats and lines over 300 characters.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

LANGUAGES = {"english": "en", "russian": "ru"}
LEFT_OUT = {"tech_support", "trivia", "coding"}  # reference Q&A, not chat
MAX_CHARS = 300
DEFAULT_FILE = Path(__file__).resolve().parent.parent / ".data" / "guard-chat-corpus.jsonl"


def corpus_folder() -> Path:
    try:
        import chatterbot_corpus
    except ImportError as exc:
        raise SystemExit(f"chatterbot-corpus is not installed ({exc}): it is a dev dependency "
                         "(./sd test installs it)") from exc
    return Path(chatterbot_corpus.__file__).resolve().parent / "data"


def corpus_lines(folder: Path) -> list[dict[str, str]]:
    """One labelled sample per distinct line of the chosen files, in file order."""
    samples: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for folder_name, language in LANGUAGES.items():
        for path in sorted((folder / folder_name).glob("*.yml")):
            if path.stem in LEFT_OUT:
                continue
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            for conversation in data.get("conversations") or []:
                for line in conversation:
                    text = line.strip() if isinstance(line, str) else ""
                    if not text or len(text) > MAX_CHARS or (language, text.lower()) in seen:
                        continue
                    seen.add((language, text.lower()))
                    samples.append({"text": text, "expected": "safe", "category": "chat", "language": language,
                                    "source": f"chat_corpus/{path.stem}"})
    return samples


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else DEFAULT_FILE
    samples = corpus_lines(corpus_folder())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples), encoding="utf-8")
    counts = {lang: sum(s["language"] == lang for s in samples) for lang in LANGUAGES.values()}
    print(f"{len(samples)} chat lines ({', '.join(f'{k} {v}' for k, v in counts.items())}) in {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
