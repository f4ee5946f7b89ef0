#!/usr/bin/env python
"""Throughput check of the fake SGLang (not an asserted test): start a server whose behaviour rule sets
``per_stream_tok_s`` / ``total_tok_s``, run N concurrent streaming clients, print achieved vs configured.

    python3 tests/lab/fake_sglang/tests/throughput_check.py [--streams 64] [--tokens 256]
        [--total 2500] [--per-stream 150] [--endpoint generate|chat|completions] [--port PORT]

With --port it measures an already running server instead (its own rate is whatever its rule says).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


async def one_stream(port: int, path: str, body: dict, stats: dict) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write((f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data)
    await writer.drain()
    n = 0
    first = None
    async for line in reader:
        if line.startswith(b"data: "):
            if line.startswith(b"data: [DONE]"):
                break
            if path == "/generate":
                n += 1
            else:
                ev = json.loads(line[6:])
                ch = ev.get("choices") or []
                if ch and (ch[0].get("text") or (ch[0].get("delta") or {}).get("content")):
                    n += 1
            if first is None:
                first = time.perf_counter()
    writer.close()
    stats["tokens"] += n
    stats["first"].append(first)
    stats["last"].append(time.perf_counter())


async def run(port: int, streams: int, tokens: int, endpoint: str) -> dict:
    if endpoint == "generate":
        path, body = "/generate", {"text": "Tell me about GPUs.", "stream": True,
                                   "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True,
                                                       "temperature": 0.7}}
    elif endpoint == "chat":
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me about GPUs."}],
                                              "max_tokens": tokens, "ignore_eos": True, "stream": True}
    else:
        path, body = "/v1/completions", {"prompt": "Tell me about GPUs.", "max_tokens": tokens,
                                         "ignore_eos": True, "stream": True}
    stats = {"tokens": 0, "first": [], "last": []}
    t0 = time.perf_counter()
    await asyncio.gather(*[one_stream(port, path, body, stats) for _stream in range(streams)])
    t1 = time.perf_counter()
    return {"tokens": stats["tokens"], "duration": t1 - t0,
            "steady": (min(stats["last"]) - max(f for f in stats["first"] if f)), "t0": t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--total", type=float, default=2500.0)
    ap.add_argument("--per-stream", type=float, default=150.0)
    ap.add_argument("--endpoint", choices=["generate", "chat", "completions"], default="generate")
    ap.add_argument("--port", type=int, default=None)
    a = ap.parse_args()
    server = None
    tmp = None
    try:
        if a.port is None:
            from fakesg_helpers import Server, write_table

            tmp = tempfile.mkdtemp(prefix="fake-sglang-tput-")
            table = write_table(os.path.join(tmp, "t.yml"), [{"name": "tput", "behaviour": "ready", "params": {
                "per_stream_tok_s": a.per_stream, "total_tok_s": a.total, "load_seconds": 0.2,
                "capture_seconds": 0.1}}])
            server = Server(os.path.join(tmp, "srv"), ["--decode-log-interval", "400"], table=table)
            server.wait_ready()
            port = server.port
        else:
            port = a.port
        r = asyncio.run(run(port, a.streams, a.tokens, a.endpoint))
        expected = min(a.total, a.streams * a.per_stream)
        per_req_steps = a.tokens
        ideal = a.streams * a.tokens / expected
        got = r["tokens"] / r["duration"]
        print(f"streams={a.streams} tokens/stream={a.tokens} endpoint={a.endpoint}")
        print(f"configured: per_stream={a.per_stream} tok/s total_cap={a.total} tok/s -> expected {expected:.1f} tok/s")
        print(f"received tokens: {r['tokens']} (expected {a.streams * per_req_steps})")
        print(f"wall duration: {r['duration']:.3f} s (ideal {ideal:.3f} s)")
        print(f"achieved output throughput: {got:.1f} tok/s = {100 * got / expected:.2f}% of configured")
        if server is not None:
            print(f"server log: {server.log_path}")
        return 0
    finally:
        if server is not None:
            server.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
