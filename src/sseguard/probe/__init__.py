"""``sseguard.probe``: many real streamed requests, each classified by how it ended.

The engine (``engine.run_request``: one request → one ``Record``, written through a sink passed in) is
separate from the scheduler (``runner``: concurrency, rate, ramp, sweep), so another runner — a Locust
user — reuses ``workloads``, ``measure.StreamWatch`` and the ``Record`` unchanged.
"""

from sseguard.probe.config import Arm, ProbeConfig, WorkloadSpec, build_config
from sseguard.probe.engine import ConnectionTracker, EngineSettings, Outcome, Target, run_request
from sseguard.probe.measure import StreamWatch, evidence_document
from sseguard.probe.runner import RunResult, execute, run_probe
from sseguard.probe.sink import JsonlSink, MemorySink, Sink
from sseguard.probe.workloads import TOOLS, Conversation, Workload, encode_body

__all__ = [
    "TOOLS",
    "Arm",
    "ConnectionTracker",
    "Conversation",
    "EngineSettings",
    "JsonlSink",
    "MemorySink",
    "Outcome",
    "ProbeConfig",
    "RunResult",
    "Sink",
    "StreamWatch",
    "Target",
    "Workload",
    "WorkloadSpec",
    "build_config",
    "encode_body",
    "evidence_document",
    "execute",
    "run_probe",
    "run_request",
]
