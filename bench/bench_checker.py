"""How much checking costs beyond reading: the full StreamChecker vs bare parsing, in one run.

Baseline: httpx-sse's line and event decoders (what the httpx ecosystem uses) plus ``json.loads`` of
every data frame, over the same bytes fed in the same 64-byte pieces, doing nothing else. Ours:
``StreamChecker.feed`` (SSE decoding + JSON + assembling + contract) and ``close()``.

Run: .venv/bin/python bench/bench_checker.py [--mb 10] [--piece 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import platform
import statistics
import time

from httpx_sse._decoders import SSEDecoder as HttpxSSEDecoder
from httpx_sse._decoders import SSELineDecoder

from sseguard.contract import StreamChecker
from sseguard.verdict import Ending

WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", " 你好",
         " ", "\n", " streaming", " tokens", " arrive", " one", " by", " one"]


def realistic_body(target_bytes: int) -> bytes:
    """OpenAI-shaped chunks (~230 B each, with the obfuscation field OpenAI adds), then finish and [DONE]."""
    head = {"id": "chatcmpl-BfR2x7kLmNoPqRsTuVwXyZ", "object": "chat.completion.chunk",
            "created": 1764748800, "model": "deepseek-v4", "system_fingerprint": "fp_3f1a2b"}
    parts: list[bytes] = []
    size = 0
    i = 0
    while size < target_bytes:
        obj = dict(head, choices=[{"index": 0, "delta": {"content": WORDS[i % len(WORDS)]},
                                   "logprobs": None, "finish_reason": None}], obfuscation="aZ3k9")
        frame = b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"
        parts.append(frame)
        size += len(frame)
        i += 1
    fin = dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    parts.append(b"data: " + json.dumps(fin).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def baseline(pieces: list[bytes]) -> int:
    """httpx-sse decoding + json.loads of each data frame, nothing else."""
    text_decoder = codecs.getincrementaldecoder("utf-8")("replace")
    lines = SSELineDecoder()
    events = HttpxSSEDecoder()
    n = 0
    for piece in pieces:
        for line in lines.decode(text_decoder.decode(piece)):
            sse = events.decode(line)
            if sse is not None and sse.data != "[DONE]":
                json.loads(sse.data)
                n += 1
    return n


def ours(pieces: list[bytes]) -> int:
    checker = StreamChecker()
    for piece in pieces:
        checker.feed(piece)
    verdict = checker.close()
    assert verdict.ending is Ending.COMPLETE and not verdict.findings, verdict.ending
    return verdict.chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--piece", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    body = realistic_body(int(args.mb * 1_000_000))
    pieces = [body[i:i + args.piece] for i in range(0, len(body), args.piece)]
    mb = len(body) / 1e6
    print(f"body {mb:.1f} MB, {len(pieces)} pieces of {args.piece} B; python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs")
    times: dict[str, list[float]] = {"baseline": [], "ours": []}
    counts = {}
    for _ in range(args.repeat):  # interleaved, so both see the same machine noise
        for name, fn in (("baseline", baseline), ("ours", ours)):
            t0 = time.process_time()
            counts[name] = fn(pieces)
            times[name].append(time.process_time() - t0)
    assert counts["baseline"] == counts["ours"], counts
    base = statistics.median(times["baseline"])
    mine = statistics.median(times["ours"])
    print(f"httpx-sse + json.loads (parse only): {mb / base:7.1f} MB/s  "
          f"({base:.3f} s CPU, median of {args.repeat})")
    print(f"sseguard StreamChecker (full check): {mb / mine:7.1f} MB/s  ({mine:.3f} s CPU)")
    print(f"speed ratio ours/baseline: {base / mine:.2f}x  (target >= 0.7x)")


if __name__ == "__main__":
    main()
