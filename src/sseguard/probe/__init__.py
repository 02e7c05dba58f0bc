"""``sseguard.probe``: many real streamed requests, each classified by how it ended.

One request's run (``request.run_request``: one request → one ``Record``, written through a sink
passed in) is separate from the scheduler (``runner``: concurrency, rate, ramp, sweep), so another
runner — a Locust user — reuses ``workloads``, ``measure.StreamWatch``, ``target`` and the ``Record``
unchanged.

The names below are imported on first use (PEP 562): the submodules a gevent process needs (``config``,
``workloads``, ``measure``, ``sink``, ``target``) import no I/O library, and importing one of them must
not pull in aiohttp through this package's ``__init__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sseguard.core._renamed import old_name

if TYPE_CHECKING:
    from sseguard.probe.config import Arm, ProbeConfig, WorkloadSpec, build_config
    from sseguard.probe.measure import StreamWatch, evidence_document
    from sseguard.probe.request import RequestResult, RequestSettings, run_request
    from sseguard.probe.runner import RunResult, execute, run_probe
    from sseguard.probe.sink import JsonlSink, MemorySink, Sink
    from sseguard.probe.target import ConnectionTracker, Target
    from sseguard.probe.workloads import TOOLS, Conversation, Workload, encode_body

_WHERE = {
    "Arm": "config", "ProbeConfig": "config", "WorkloadSpec": "config", "build_config": "config",
    "RequestResult": "request", "RequestSettings": "request", "run_request": "request",
    "StreamWatch": "measure", "evidence_document": "measure",
    "RunResult": "runner", "execute": "runner", "run_probe": "runner",
    "JsonlSink": "sink", "MemorySink": "sink", "Sink": "sink",
    "ConnectionTracker": "target", "Target": "target",
    "TOOLS": "workloads", "Conversation": "workloads", "Workload": "workloads", "encode_body": "workloads",
}

__all__ = [
    "TOOLS",
    "Arm",
    "ConnectionTracker",
    "Conversation",
    "JsonlSink",
    "MemorySink",
    "ProbeConfig",
    "RequestResult",
    "RequestSettings",
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


#: Old names (docs/design/vocabulary.md "Names": "engine" is the serving engine only) → new.
_RENAMED = {"EngineSettings": "RequestSettings", "Outcome": "RequestResult"}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        return old_name(__name__, name, _RENAMED[name])
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sseguard.probe' has no attribute {name!r}")
    return getattr(importlib.import_module(f"sseguard.probe.{module}"), name)
