"""``python -m devstack.llmserver``: llama.cpp's OpenAI-compatible server from the prebuilt ``xllamacpp`` wheel.

xllamacpp runs llama.cpp's own HTTP server (chat completions, JSON-schema and
grammar constrained decoding, prompt caching) inside this Python process, so the
first ``./sd run`` compiles nothing. The process serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.llmserver")
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--alias", required=True, help="the model name the server answers to")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=8192, help="context tokens, shared by the parallel slots")
    parser.add_argument("--parallel", type=int, default=2, help="requests decoded at once")
    args = parser.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.kv_unified = True  # one KV cache for all slots: a long prompt may use the whole context
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True  # the model's own chat template (tool calls, JSON)
    params.cache_prompt = True  # reuse the cached prefix of the previous request in the slot
    params.ui = False

    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    server = xllamacpp.Server(params)
    print(f"llama.cpp server (xllamacpp {xllamacpp.__version__}) on {server.listening_address}, model {args.alias}",
          flush=True)
    stopped.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
