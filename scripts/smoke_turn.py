"""Send one message to a running SupportDesk and print the turn's events as they stream.

    .venv/bin/python scripts/smoke_turn.py [--base http://127.0.0.1:8000] [--lang en] "How do I edit a template?"

Exits non-zero unless the turn ends with a ``done`` event of status ``done``.
Prints the time to the first token and to the end of the turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request

import websockets


def create_conversation(base: str, language: str) -> dict:
    request = urllib.request.Request(
        f"{base}/api/conversations",
        data=json.dumps({"language": language}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.load(resp)


async def run_turn(base: str, language: str, text: str, timeout: float) -> int:
    conversation = create_conversation(base, language)
    ws_url = base.replace("http", "ws", 1) + f"/ws/conversations/{conversation['id']}/?token={conversation['token']}"
    started = time.monotonic()
    first_token: float | None = None
    async with websockets.connect(ws_url, origin=base) as socket:
        await socket.send(json.dumps({"type": "message", "text": text}))
        while True:
            frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=timeout))
            kind, payload = frame["type"], frame.get("payload", {})
            if kind == "token":
                if first_token is None:
                    first_token = time.monotonic() - started
                    print("answer: ", end="")
                print(payload["text"], end="", flush=True)
                continue
            if first_token is not None and kind != "token":
                print()
            print(f"[{frame.get('seq')}] {kind}: {json.dumps(payload, ensure_ascii=False)[:300]}")
            if kind == "done":
                total = time.monotonic() - started
                ttft = f"{first_token:.2f}s" if first_token is not None else "n/a"
                print(f"time to first token {ttft}, turn {total:.2f}s, status {payload.get('status')}")
                return 0 if payload.get("status") == "done" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text")
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--lang", default="en")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each event")
    args = parser.parse_args()
    return asyncio.run(run_turn(args.base.rstrip("/"), args.lang, args.text, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
