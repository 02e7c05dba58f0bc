"""Public names renamed so that one word names one thing (docs/design/vocabulary.md "Names") still
work under their old names: the very object of the new name, with a ``DeprecationWarning`` that names
the new one. Old and new names are written out here, never read from the product's own tables."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

#: (module, old name, new name), literally.
RENAMED = [
    ("sseguard.probe", "EngineSettings", "RequestSettings"),
    ("sseguard.probe", "Outcome", "RequestResult"),
    ("sseguard.probe.request", "EngineSettings", "RequestSettings"),
    ("sseguard.probe.request", "Outcome", "RequestResult"),
    ("sseguard.analyze.backends", "Engine", "Backend"),
    ("sseguard.analyze.backends", "EngineError", "BackendError"),
    ("sseguard.analyze.backends", "DuckDBEngine", "DuckDBBackend"),
    ("sseguard.analyze.backends", "SQLiteEngine", "SQLiteBackend"),
    ("sseguard.analyze.backends", "PostgresEngine", "PostgresBackend"),
    ("sseguard.analyze.backends", "SparkEngine", "SparkBackend"),
    ("sseguard.analyze.backends", "open_engine", "open_backend"),
    ("sseguard.analyze.backends", "open_engines", "open_backends"),
    ("sseguard.analyze.facts", "Dialect", "SqlDialect"),
    ("sseguard.chaos", "Dialect", "ServerDialect"),
    ("sseguard.chaos.faults", "Dialect", "ServerDialect"),
    ("sseguard.chaos.generate", "Answer", "GeneratedAnswer"),
    ("sseguard.core.reasoning", "Answer", "AnswerText"),
    ("sseguard.core.contract.request", "Answer", "AssistantAnswer"),
    ("sseguard.probe.formats", "Answer", "AssistantAnswer"),
    ("sseguard.core.contract", "Relay", "RelayTable"),
    ("sseguard.core.contract.protocol", "Relay", "RelayTable"),
    ("sseguard.core.contract.gemini.assembler", "Record", "TypedResponse"),
    ("sseguard.core.contract.gemini.assembler", "decode_record", "decode_response"),
    ("sseguard.telemetry.genai", "Call", "MeasuredCall"),
    ("sseguard.telemetry.genai", "Plan", "CallSignals"),
    ("sseguard.chaos.generate", "Call", "GeneratedCall"),
    ("sseguard.chaos.conversations", "Conversation", "ServedConversation"),
    ("sseguard.core.contract.request", "Settings", "BodySettings"),
    ("sseguard.probe.formats", "Settings", "BodySettings"),
    ("sseguard.locust.launch", "Settings", "LaunchSettings"),
    ("sseguard.probe.formats", "check_body", "check_request_body"),
    ("sseguard.probe.runner", "describe", "describe_run"),
    ("sseguard.probe.consistency", "render", "prompt_body"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED, ids=[f"{m}.{o}" for m, o, _ in RENAMED])
def test_an_old_name_warns_and_is_the_new_object(module: str, old: str, new: str) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} was renamed {new}\b"):
        got = getattr(mod, old)
    assert got is getattr(mod, new)


@pytest.mark.parametrize(("module", "old", "new"), RENAMED, ids=[f"{m}.{o}" for m, o, _ in RENAMED])
def test_the_new_name_does_not_warn(module: str, old: str, new: str) -> None:
    mod = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obj = getattr(mod, new)
    assert not isinstance(obj, type) or obj.__name__ == new


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    mod = importlib.import_module("sseguard.chaos")
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = mod.NoSuchName


def test_from_import_of_an_old_name_through_an_old_module_path() -> None:
    """Code written before both moves: the old module path and the old class name in one line."""
    code = (
        "import warnings\n"
        "warnings.simplefilter('always', DeprecationWarning)\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    from sseguard.analyze.engines import DuckDBEngine\n"
        "    from sseguard.probe.engine import EngineSettings\n"
        "from sseguard.analyze.backends import DuckDBBackend\n"
        "from sseguard.probe.request import RequestSettings\n"
        "print('same:', DuckDBEngine is DuckDBBackend and EngineSettings is RequestSettings)\n"
        "for w in seen:\n"
        "    print('warned:', w.category.__name__, w.message)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert "same: True" in out
    warned = "warned: DeprecationWarning "
    assert warned + "sseguard.analyze.engines moved to sseguard.analyze.backends" in out
    assert warned + "sseguard.analyze.backends.DuckDBEngine was renamed DuckDBBackend" in out
    assert warned + "sseguard.probe.engine moved to sseguard.probe.request" in out
    assert warned + "sseguard.probe.request.EngineSettings was renamed RequestSettings" in out
