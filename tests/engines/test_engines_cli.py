"""Registration, as an operator meets it: ``vllm serve … --tool-call-parser sseguard-<family>`` and
``sglang serve … --tool-call-parser sseguard-<family>`` get past argument validation for every family
(then fail on the missing model), a misspelt name is refused with the list, and with the engine's
plugin allowlist excluding ours the names are unknown.

Every family is checked in process, through the engine's own argument parser and validation (the
same functions ``serve`` runs, after the plugins loaded); the three cases above also run the real
``serve`` commands once each (about a minute apiece: importing an engine is most of it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sseguard.core.toolcalls import families
from sseguard.engines import reasoning_parser_names, tool_parser_names
from support.engines import engine

pytestmark = pytest.mark.timeout(900)
BIN = Path(sys.executable).parent
MISSING = "/nonexistent/model"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}


def run_all(commands: dict[str, tuple[list[str], dict[str, str]]]) -> dict[str, tuple[int, str]]:
    """Run the commands side by side; each one's exit status and output."""
    procs = {key: subprocess.Popen(argv, env={**ENV, **env}, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, cwd="/")
             for key, (argv, env) in commands.items()}
    return {key: (p.wait(timeout=600), p.communicate()[0]) for key, p in procs.items()}


# ── vLLM ────────────────────────────────────────────────────────────────────────────────────────

@pytest.fixture(scope="module")
def vllm_serve() -> Iterator[dict[str, tuple[int, str]]]:
    engine("vllm")
    serve = [str(BIN / "vllm"), "serve", MISSING, "--port", "0", "--enable-auto-tool-choice"]
    yield run_all({
        "ok": ([*serve, "--tool-call-parser", "sseguard-hermes", "--reasoning-parser", "sseguard-hermes"],
               {}),
        "misspelt": ([*serve, "--tool-call-parser", "sseguard-hermse"], {}),
        "no plugins": ([*serve, "--tool-call-parser", "sseguard-hermes"], {"VLLM_PLUGINS": ""}),
    })


def test_vllm_serve_takes_our_name_and_fails_only_later_on_the_missing_model(
        vllm_serve: dict[str, tuple[int, str]]) -> None:
    status, out = vllm_serve["ok"]
    assert status != 0 and "invalid tool call parser" not in out and "invalid reasoning parser" not in out
    assert "build_async_engine_client" in out and MISSING in out  # past setup_server's validation


def test_vllm_serve_refuses_a_misspelt_name_listing_ours(vllm_serve: dict[str, tuple[int, str]]) -> None:
    status, out = vllm_serve["misspelt"]
    assert status != 0 and "invalid tool call parser: sseguard-hermse" in out
    assert "sseguard-hermes," in out and "sseguard-hermes-stream" in out


def test_vllm_serve_with_no_plugins_allowed_knows_none_of_ours(
        vllm_serve: dict[str, tuple[int, str]]) -> None:
    status, out = vllm_serve["no plugins"]
    assert status != 0 and "invalid tool call parser: sseguard-hermes" in out
    listed = out.split("chose from", 1)[1]
    assert "sseguard-" not in listed and "hermes," in listed


def test_vllm_argument_validation_accepts_every_family_as_tool_and_reasoning_parser() -> None:
    engine("vllm")
    from vllm.entrypoints.common.cli_args import (
        init_parser_plugin,
        make_arg_parser,
        validate_api_server_args,
    )
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())  # loads the general plugins, ours among them
    tools, reasoning = list(tool_parser_names()), list(reasoning_parser_names())
    assert len(tools) == 2 * len(families())  # hold and -stream, for every family
    for name in tools:
        argv = ["--model", MISSING, "--enable-auto-tool-choice", "--tool-call-parser", name]
        if name in reasoning:
            argv += ["--reasoning-parser", name]
        args = parser.parse_args(argv)
        init_parser_plugin(args)
        validate_api_server_args(args)  # raises KeyError for an unknown name
    with pytest.raises(KeyError, match="sseguard-hermes-stream"):
        validate_api_server_args(parser.parse_args(
            ["--model", MISSING, "--enable-auto-tool-choice", "--tool-call-parser", "sseguard-nope"]))


# ── SGLang ──────────────────────────────────────────────────────────────────────────────────────

@pytest.fixture(scope="module")
def sglang_serve() -> Iterator[dict[str, tuple[int, str]]]:
    engine("sglang.srt.function_call.function_call_parser")
    serve = [str(BIN / "sglang"), "serve", "--model-path", MISSING]
    yield run_all({
        "ok": ([*serve, "--tool-call-parser", "sseguard-hermes", "--reasoning-parser", "sseguard-hermes"],
               {}),
        "misspelt": ([*serve, "--tool-call-parser", "sseguard-hermse"], {}),
        "no plugins": ([*serve, "--tool-call-parser", "sseguard-hermes"], {"SGLANG_PLUGINS": "other"}),
    })


def test_sglang_serve_takes_our_name_and_fails_only_later_on_the_missing_model(
        sglang_serve: dict[str, tuple[int, str]]) -> None:
    status, out = sglang_serve["ok"]
    assert status != 0 and "invalid choice" not in out
    assert "launch_server" in out and MISSING in out  # arguments parsed, the server being started


def test_sglang_serve_refuses_a_misspelt_name_listing_ours(
        sglang_serve: dict[str, tuple[int, str]]) -> None:
    status, out = sglang_serve["misspelt"]
    assert status == 2 and "argument --tool-call-parser: invalid choice: 'sseguard-hermse'" in out
    assert "'sseguard-hermes'" in out and "'sseguard-hermes-stream'" in out


def test_sglang_serve_with_another_plugin_allowed_knows_none_of_ours(
        sglang_serve: dict[str, tuple[int, str]]) -> None:
    status, out = sglang_serve["no plugins"]
    assert status == 2 and "invalid choice: 'sseguard-hermes'" in out
    assert "'sseguard-" not in out.split("choose from", 1)[1]


def test_sglang_argument_parser_accepts_every_family_as_tool_and_reasoning_parser() -> None:
    engine("sglang.srt.function_call.function_call_parser")
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import ServerArgs

    load_plugins()
    parser = argparse.ArgumentParser(exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    reasoning = reasoning_parser_names()
    for name in tool_parser_names():
        argv = ["--model-path", MISSING, "--tool-call-parser", name]
        if name in reasoning:
            argv += ["--reasoning-parser", name]
        args = parser.parse_args(argv)
        assert args.tool_call_parser == name
    with pytest.raises(argparse.ArgumentError, match="invalid choice"):
        parser.parse_args(["--model-path", MISSING, "--tool-call-parser", "sseguard-nope"])
