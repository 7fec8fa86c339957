"""Prefill and generation speed of a running llama.cpp server (the run command's local model).

    python scripts/bench_local_llm.py --base-url http://127.0.0.1:8081 [--runs 3] [--cached]

Sends a support-sized prompt (~600 tokens) and asks for 64 tokens, ``--runs`` times,
and prints the server's own timings (prompt and generated tokens per second). Without
``--cached`` the prompt cache is bypassed, so every run measures a full prefill; with
it, the runs after the first show what prefix reuse saves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import urllib.request

ARTICLE = (
    "The SupportDesk widget is the chat bubble in the corner of the demo page. Click it to open a conversation; "
    "the widget creates the conversation through the API and keeps its access token in the browser, so reloading "
    "the page continues the same conversation. Type a question and press Enter. Every message is screened by the "
    "guardian, analysed by the planning step and, when the plan allows it, answered from the knowledge base. "
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8081")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cached", action="store_true")
    args = parser.parse_args()
    prompt, generated = [], []
    for run in range(args.runs):
        body = {
            "messages": [
                {"role": "system", "content": "You are a helpful customer-support assistant. Cite sources like [1]."},
                {"role": "user", "content": f"[1] Using the chat widget\n{ARTICLE * 6}\n\nQuestion {run}: how do I "
                                            "open a conversation, and what happens when I reload the page?"},
            ],
            "max_tokens": 64, "temperature": 0, "cache_prompt": args.cached,
        }
        request = urllib.request.Request(f"{args.base_url}/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            timings = json.load(response)["timings"]
        prompt.append(timings["prompt_per_second"])
        generated.append(timings["predicted_per_second"])
        print(f"run {run + 1}: prompt {timings['prompt_n']} tok at {timings['prompt_per_second']:.1f} tok/s, "
              f"generated {timings['predicted_n']} tok at {timings['predicted_per_second']:.1f} tok/s", flush=True)
    print(f"median: prompt {statistics.median(prompt):.1f} tok/s, generation {statistics.median(generated):.1f} tok/s")


if __name__ == "__main__":
    main()
