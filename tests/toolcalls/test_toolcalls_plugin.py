"""A third-party markup family, installed as a real distribution, works everywhere a built-in does.

The distribution is written into a temporary directory the way an installer leaves one (a module and
its ``*.dist-info`` with ``entry_points.txt``), and that directory is put on ``PYTHONPATH`` of fresh
interpreters: ``importlib.metadata`` finds its ``sseguard.families`` entry point as it finds any
installed package's. Nothing in sseguard's registry is patched. The plugin is the three lines of
``docs/markup.md``: ``json_in_tags("toy", "<<call>>", "<</call>>")``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

TOY_MODULE = '''from sseguard.core.toolcalls import json_in_tags

TOY = json_in_tags("toy", "<<call>>", "<</call>>")
'''
CALL = '<<call>>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n<</call>>'
ANSWER = "Sure." + CALL


def _distribution(root: Path, name: str, modules: dict[str, str], entry_points: str) -> Path:
    """A distribution as an installer leaves it in ``root``: its modules and its dist-info."""
    root.mkdir()
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source, encoding="utf-8")
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _distribution(tmp_path_factory.mktemp("plugin") / "site", "toy-family",
                         {"toyfam": TOY_MODULE}, "[sseguard.families]\ntoy = toyfam:TOY\n")


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _distribution(tmp_path_factory.mktemp("broken") / "site", "toy-broken",
                         {"toybroken": "NOT_A_FAMILY = 42\n"},
                         "[sseguard.families]\nmissing = toy_missing_module:FAMILY\n"
                         "wrong = toybroken:NOT_A_FAMILY\n")


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _python(code: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=_env(*paths), capture_output=True,
                          text=True, timeout=60)


def _sseguard(args: list[str], *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from sseguard.cli import main; main()", *args],
                          env=_env(*paths), capture_output=True, text=True, timeout=60)


_PARSE = '''
import json, sys
from sseguard.core.toolcalls import event_to_dict, join_events, parser_for
text = sys.argv[1]
out = {}
for family in ("toy", "auto"):
    for name, pieces in (("whole", [text]), ("chars", list(text))):
        p = parser_for(family)
        events = [e for piece in pieces for e in p.feed(piece)] + p.close()
        out[f"{family} {name}"] = [event_to_dict(e) for e in join_events(events)]
        out[f"{family} {name} detected"] = getattr(p, "detected", family)
print(json.dumps(out))
'''


def test_the_plugin_family_parses_by_name_and_auto_claims_it(toy: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _PARSE, ANSWER], env=_env(toy),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    expected = [
        {"type": "Text", "text": "Sure."},
        {"type": "ToolCallStart", "index": 0, "name": "get_weather"},
        {"type": "ToolArgsDelta", "index": 0, "fragment": '{"city": "Paris"}'},
        {"type": "ToolCallEnd", "index": 0, "name": "get_weather", "arguments": '{"city": "Paris"}',
         "raw": CALL},
    ]
    for key in ("toy whole", "toy chars", "auto whole", "auto chars"):
        assert out[key] == expected, key
    assert out["auto whole detected"] == out["auto chars detected"] == "toy"
    assert done.stderr == ""


def test_the_plugin_family_is_listed_after_the_built_ins(toy: Path) -> None:
    done = _python("from sseguard.core.toolcalls import families; print(','.join(families()))", toy)
    names = done.stdout.strip().split(",")
    assert names[:12] == ["dsml-v32", "dsml-v4", "dsml-v41", "deepseek-v3", "deepseek-v31",
                          "hermes", "glm45", "glm47", "qwen3-coder", "kimi-k2", "harmony",
                          "minimax-m2"]
    assert names[-1] == "toy" and names.count("toy") == 1


def test_sseguard_parse_reads_the_plugin_family(toy: Path, tmp_path: Path) -> None:
    path = tmp_path / "answer.txt"
    path.write_text(ANSWER, encoding="utf-8")
    done = _sseguard(["parse", str(path), "--family", "toy", "--json"], toy)
    assert done.returncode == 0, done.stderr
    assert '"get_weather"' in done.stdout


def _chat_body(*contents: str) -> bytes:
    """A complete chat stream whose content arrives in ``contents``, one delta each."""
    def frame(delta: dict[str, str], finish: str | None) -> str:
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\n\n"
    deltas = "".join(frame({"content": c}, None) for c in contents)
    return (frame({"role": "assistant"}, None) + deltas + frame({}, "stop")
            + "data: [DONE]\n\n").encode()


def test_sseguard_check_finds_the_plugin_marker_leaked_in_content(toy: Path, tmp_path: Path) -> None:
    leaked, clean = tmp_path / "leaked.sse", tmp_path / "clean.sse"
    leaked.write_bytes(_chat_body(ANSWER))
    clean.write_bytes(_chat_body("Sure, it is sunny in Paris."))
    done = _sseguard(["check", str(leaked), "--markup", "toy", "--json"], toy)
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)
    assert [f["kind"] for f in verdict["findings"]] == ["markup_leak"]
    assert "'<<call>>' in content of choice 0" in verdict["findings"][0]["detail"]
    # every family, the plugin's included, is looked for by default; a built-in alone misses it
    assert _sseguard(["check", str(leaked), "--json"], toy).returncode == 1
    assert _sseguard(["check", str(leaked), "--markup", "hermes"], toy).returncode == 0
    assert _sseguard(["check", str(clean), "--markup", "toy"], toy).returncode == 0


_CHECK = '''
import sys
from sseguard.core.contract import StreamChecker
checker = StreamChecker(markup=sys.argv[2])
for i in range(0, len(sys.argv[1]), 3):  # the body in 3-byte pieces: the marker spans deltas
    checker.feed(sys.argv[1][i:i + 3].encode())
for finding in checker.close().findings:
    print(finding.kind, finding.detail)
'''


def test_the_chat_checkers_leak_scan_finds_the_plugin_marker_across_deltas(toy: Path) -> None:
    stream = _chat_body("Sure.<<ca", "ll>>\n{}").decode()
    done = subprocess.run([sys.executable, "-c", _CHECK, stream, "toy"], env=_env(toy),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "markup_leak '<<call>>' in content of choice 0 at 5"]


def test_sseguard_chaos_renders_calls_in_the_plugin_family(toy: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "from sseguard.cli import main; main()", "chaos",
                             "--listen", "127.0.0.1:0", "--json", "--raw-markup", "toy",
                             "--seed", "7"],
                            env=_env(toy), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["raw_markup"] == "toy"
        tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}
        with httpx2.Client(timeout=10) as client:
            r = client.post(f"{info['url']}/chat/completions", json={
                "model": "m", "stream": False, "tools": [tool],
                "messages": [{"role": "user", "content": "Call get_weather."}]})
        content = r.json()["choices"][0]["message"]["content"]
        _, sep, rest = content.partition("<<call>>\n")
        assert sep and rest.endswith("\n<</call>>") and "<<call>>" not in rest
        call = json.loads(rest.removesuffix("\n<</call>>"))
        assert call["name"] == "get_weather" and isinstance(call["arguments"]["city"], str)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_broken_plugin_is_one_warning_line_and_everything_else_works(toy: Path,
                                                                       broken: Path) -> None:
    done = _python("from sseguard.core.toolcalls import families; print(','.join(families()))",
                   broken, toy)
    assert done.returncode == 0
    names = done.stdout.strip().split(",")
    assert "minimax-m2" in names and names[-1] == "toy"  # built-ins and the good plugin
    lines = done.stderr.splitlines()
    assert lines == [
        "sseguard.families:0: FamilyPluginWarning: markup family plugin 'missing' "
        "(toy_missing_module:FAMILY) from distribution 'toy-broken' is skipped: "
        "ModuleNotFoundError: No module named 'toy_missing_module'",
        "sseguard.families:0: FamilyPluginWarning: markup family plugin 'wrong' "
        "(toybroken:NOT_A_FAMILY) from distribution 'toy-broken' is skipped: it is a int, "
        "not a sseguard Family",
    ]
    assert "Traceback" not in done.stderr
    # the command line goes on too: the warning, then the command's own result
    check = _sseguard(["check", "--markup", "hermse", "/dev/null"], broken, toy)
    assert check.returncode == 2
    assert "'hermse'" in check.stderr and "unknown markup family" in check.stderr
    assert "known: dsml-v32, dsml-v4" in check.stderr and ", toy, " in check.stderr
    assert "Traceback" not in check.stderr


def test_sseguard_proxy_repairs_the_plugin_markup_into_tool_calls_for_the_openai_sdk(
        toy: Path, tmp_path: Path) -> None:
    import openai

    cli = [sys.executable, "-c", "from sseguard.cli import main; main()"]
    chaos = subprocess.Popen([*cli, "chaos", "--listen", "127.0.0.1:0", "--json", "--raw-markup", "toy",
                              "--seed", "7"], env=_env(toy), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    procs = [chaos]
    try:
        assert chaos.stdout is not None
        upstream = json.loads(chaos.stdout.readline())["url"]
        proxy = subprocess.Popen([*cli, "proxy", "--upstream", upstream, "--listen", "127.0.0.1:0",
                                  "--repair-markup", "toy", "--store", str(tmp_path / "p.db")],
                                 env=_env(toy), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        procs.append(proxy)
        assert proxy.stdout is not None
        line = proxy.stdout.readline()
        assert line.startswith("sseguard proxy listening on http://127.0.0.1:"), line
        tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}
        client = openai.OpenAI(base_url=line.split()[4], api_key="sk-test", max_retries=0)
        stream = client.chat.completions.create(
            model="m", stream=True, tools=[tool],
            messages=[{"role": "user", "content": "Call get_weather."}])
        content, names, arguments = "", "", ""
        for chunk in stream:
            delta = chunk.choices[0].delta if chunk.choices else None
            content += (delta.content or "") if delta else ""
            for call in (delta.tool_calls or []) if delta else []:
                names += (call.function.name or "") if call.function else ""
                arguments += (call.function.arguments or "") if call.function else ""
        assert names == "get_weather"
        assert isinstance(json.loads(arguments)["city"], str)
        assert "<<call>>" not in content and "<</call>>" not in content
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
