"""A command line that starts at once (issue 49): ``sseguard --help`` imports no command, ``sseguard
check`` only the checker, and no module outside the extras imports a heavy library.

Each check runs in a fresh interpreter (``sys.modules`` of this test process holds everything the
suite imported). Heavy libraries are refused by an import hook first on ``sys.meta_path``, so an
import of one fails loudly instead of merely showing up in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer.main

from sseguard.cli._app import COMMANDS, app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: What the core never imports: the extras' libraries, the engines, and what they pull in.
HEAVY = ["numpy", "scipy", "matplotlib", "duckdb", "pyarrow", "psycopg", "psycopg_binary", "tokenizers",
         "pyspark", "locust", "gevent", "geventhttpclient", "pandas", "huggingface_hub", "vllm", "sglang",
         "torch", "transformers"]

REFUSE_HEAVY = f"""
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Refuse())
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", REFUSE_HEAVY + code, *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


#: Runs the CLI with argv, then prints which of the watched modules it imported (one JSON line).
AFTER_CLI = """
import json, sys
sys.argv = ["sseguard", *sys.argv[1:]]
from sseguard.cli import main
try:
    main()
except SystemExit:
    pass
watched = ("aiohttp", "httpx2", "anyio", "uvloop", "prometheus_client", "jsonschema", "yarl",
           "sseguard.core.contract", "sseguard.core.toolcalls", "sseguard.probe", "sseguard.proxy",
           "sseguard.chaos",
           "sseguard.store", "sseguard.analyze", "sseguard.client", "sseguard.engines", "sseguard.locust")
loaded = sorted(name for name in sys.modules
                if name.startswith("sseguard.cli.") or name in watched)
print(json.dumps(loaded))
"""


def test_help_imports_no_command_and_no_library_of_one() -> None:
    loaded = json.loads(_run(AFTER_CLI, "--help"))
    assert loaded == ["sseguard.cli._app"]


def test_check_imports_the_checker_and_no_server_client_or_store() -> None:
    loaded = json.loads(_run(AFTER_CLI, "check", str(EXAMPLES / "bodies" / "complete.sse")))
    assert "sseguard.cli.check" in loaded and "sseguard.core.contract" in loaded
    assert [name for name in loaded if name.split(".")[0] != "sseguard"] == []
    assert [name for name in loaded if name.split(".")[1] in (
        "probe", "proxy", "chaos", "store", "analyze", "client", "engines", "locust")] == []


WALK = """
import importlib, json, pkgutil, sseguard
from sseguard.extras import MissingExtra
refused = {}
for info in pkgutil.walk_packages(sseguard.__path__, "sseguard."):
    if info.name.endswith(".__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:
        refused[info.name] = exc.name.split(".")[0]
    except MissingExtra as exc:
        refused[info.name] = f"[{exc.extra}]"
print(json.dumps(refused, sort_keys=True))
"""


def test_no_module_outside_the_extras_imports_a_heavy_library() -> None:
    # Literal: the modules that need an extra (or an engine, or LiteLLM: the user's) and the library
    # each reaches first, or the extra, for one that asks ``sseguard.analyze`` for a name of the
    # analysis.
    assert json.loads(_run(WALK)) == {
        "sseguard.analyze.attributes": "numpy", "sseguard.analyze.consistency": "numpy",
        "sseguard.analyze.headlines": "numpy", "sseguard.analyze.healing": "numpy",
        "sseguard.analyze.model": "numpy", "sseguard.analyze.plots": "matplotlib",
        "sseguard.analyze.report": "numpy", "sseguard.analyze.run": "numpy",
        "sseguard.analyze.stats": "numpy", "sseguard.analyze.summary": "numpy",
        "sseguard.demo": "[analyze]",
        "sseguard.engines.sglang_detector": "sglang", "sseguard.engines.vllm_reasoning": "vllm",
        "sseguard.engines.vllm_tool": "vllm",
        "sseguard.integrations.litellm.guardrail": "litellm",
        "sseguard.locust.locustfile": "gevent", "sseguard.locust.user": "gevent",
        "sseguard.store.postgres": "psycopg",
    }


def test_the_help_table_names_every_registered_command_and_gives_it_its_summary() -> None:
    # Importing every command module registers every command; the table must list exactly those.
    for module, _summary in COMMANDS.values():
        __import__(module)
    registered = typer.main.get_group(app).commands
    assert sorted(registered) == sorted(COMMANDS)
    group = typer.main.get_command(app)
    for name, (_module, summary) in COMMANDS.items():
        command = group.get_command(None, name)  # type: ignore[attr-defined]
        assert command.short_help == summary


def test_a_misspelt_command_is_one_error_with_the_near_name_and_exit_2() -> None:
    done = subprocess.run([sys.executable, "-c", "from sseguard.cli import main; main()", "chek"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "Error: No such command 'chek'. Did you mean 'check'?"
    done = subprocess.run([sys.executable, "-c", "from sseguard.cli import main; main()", "zzz"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, "Error: No such command 'zzz'.")
