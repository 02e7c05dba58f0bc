"""Instructions of the probe's per-request work outside the socket and the checker, step by step.

Everything ``run_request`` and the runner's worker do once per request, on a captured stream and
with no I/O library: the body (``next_body``, ``finish``, ``encode_body``), the ``StreamWatch``
(made, told the headers, fed every read, finished), the ``Record`` (``StreamWatch.record``: timings,
redaction), the JSONL sink and the run's tally. Each step is run ``N`` and ``N + 100`` times under
``valgrind --tool=callgrind`` and the difference divided by 100, so start-up and imports cancel out.
The checker's own work is in the "stream" step (``feed`` and ``finish``), as ``bench_checker.py``
measures it; the other steps are the probe's own.

Run: .venv/bin/python bench/callgrind_probe_request.py [--api chat]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

STEPS = ("body", "stream", "record", "sink", "tally")

#: One request's steps, ``n`` times over; ``step`` picks the one to run.
SCRIPT = """
import sys, tempfile
from pathlib import Path
sys.path.insert(0, "bench")
from bench_checker import ANSWER_REQUESTS, ANSWERS, frames_of
from sseguard.policy import Policy
from sseguard.probe.config import WorkloadSpec
from sseguard.probe.live import Tally
from sseguard.probe.measure import StreamWatch
from sseguard.probe.sink import JsonlSink
from sseguard.probe.workloads import Workload, encode_body
from sseguard.redact import Redactor
from sseguard.verdict import Api

api, step, n = Api(sys.argv[1]), sys.argv[2], int(sys.argv[3])
reads = frames_of(ANSWERS[api](100))
request = ANSWER_REQUESTS[api]
headers = [("Content-Type", "text/event-stream"), ("Date", "Fri, 04 Dec 2026 14:00:00 GMT"),
           ("Transfer-Encoding", "chunked"), ("Server", "Python/3.11 aiohttp/3.14"),
           ("X-Request-Id", "req_abc123"), ("X-Sseguard-Fault", "none")]
policy, redactor = Policy(), Redactor(["sk-test-key-1234567890"])
sink = JsonlSink(Path(tempfile.mkdtemp()))
tally = Tally(policy)
workload = Workload(WorkloadSpec(name="small"))
conversation = workload.conversation(0, api)


def stream():
    watch = StreamWatch(request, sent_at=0.0, started_at=1.7e9, api=api)
    watch.response(200, headers, 0.001)
    for i, read in enumerate(reads):
        watch.feed(read, 0.002 + i * 0.05)
    return watch, watch.finish(6.0)


def record(watch, verdict, i):
    return watch.record(verdict, policy=policy, redactor=redactor, model="m", source="probe",
                        run_id="r", arm="a", index=i, worker=None, workload="small",
                        path="/v1/chat/completions", prompt_bytes=100, concurrency=1000,
                        reuse_index=0, connection="c1", extra=redactor.obj({}))


watch, verdict = stream()
rec = record(watch, verdict, 0)
for i in range(n):
    if step == "body":
        encode_body(workload.finish(conversation.next_body(), model="m", api=api))
    elif step == "stream":
        stream()
    elif step == "record":
        record(watch, verdict, i)
    elif step == "sink":
        sink.write(rec)
    elif step == "tally":
        tally.add(rec)
"""


def count(script: Path, api: str, step: str, n: int) -> int:
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, str(script), api, step, str(n)],
                          capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(done.stderr[-2000:])
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", default="chat")
    parser.add_argument("--steps", default=",".join(STEPS))
    args = parser.parse_args()
    script = Path(__file__).with_name("_probe_request_steps.py")
    script.write_text(SCRIPT)
    try:
        total = 0
        print(f"| step ({args.api}) | instructions per request |")
        print("|---|---|")
        for step in args.steps.split(","):
            per = (count(script, args.api, step, 110) - count(script, args.api, step, 10)) // 100
            total += per
            print(f"| {step} | {per:,} |", flush=True)
        print(f"| all | {total:,} |")
    finally:
        script.unlink()


if __name__ == "__main__":
    main()
