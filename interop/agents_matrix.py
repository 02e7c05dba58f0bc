"""What real coding agents do on each bad ending of a stream, directly and through ``sseguard proxy``.

Run by hand (not by the test suite; it needs the agents from npm and takes ~15 minutes). Each run is
one agent asked "Say hello" headless, with a dummy key, against a fresh ``sseguard chaos`` that
injects one fault into every response (``--fault NAME=1``, seed 7), either directly or through a
fresh ``sseguard proxy`` with default options (policy ``agents``; its store in the run's own
directory). Every run is bounded (``--timeout``; ``--stall-timeout-run`` for ``stalled``, longer
than the proxy's default 60 s stall timeout); a run still going is killed (its process group) and
classed by the requests the upstream saw: ``loops`` (at least ``LOOP_PER_MIN`` requests a minute) or
``hangs``. Upstream requests are the chaos server's own count (``GET /chaos/stats``), so retries and
side requests (titles) are included.

Results go to a JSON Lines file (one object a run); ``--table`` prints the Markdown tables of
``docs/agents.md`` from it.

Setup (once; /work/agents-npm is outside the repository):
    .venv/bin/python interop/agents_matrix.py --setup --npm-dir /work/agents-npm
Run:
    .venv/bin/python interop/agents_matrix.py --npm-dir /work/agents-npm --jobs 3 --out agents.jsonl
    .venv/bin/python interop/agents_matrix.py --table agents.jsonl
Subsets: --agents opencode,codex --faults truncated,no_done --modes direct; a proxy option:
    --proxy-arg=--complete-done

Healing (issue 38, ``--heal``): chaos breaks only each conversation's first answer
(``sseguard chaos --first-answer truncated``: cut after half of it; ``http_error``: a 503 before the
first byte) and answers every later request of the conversation whole; the proxy runs with
``--retry 2 --resume vllm,anthropic,openai-background`` (``HEAL_PROXY_ARGS``). A run is **healed**
when the agent exited 0, printed the conversation's whole last answer (chaos's
``/chaos/conversations``), made as many requests as on a healthy run through the same proxy (so
it did not ask again itself), and the proxy counted a healed stream and no failed one:
    .venv/bin/python interop/agents_matrix.py --heal --agents claude,opencode --runs 10 \
        --endings truncated,http_error --out heal.jsonl
    .venv/bin/python interop/agents_matrix.py --heal --agents codex --proxy-arg=--resume-store-ok ...
    .venv/bin/python interop/agents_matrix.py --heal-table heal.jsonl
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

FAULTS = ("healthy", "truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error",
          "error_event", "stalled", "tool_call_unterminated")
# Faults that leave the answer's text cut short: an exit 0 on them accepts half an answer.
CUTS_TEXT = {"truncated", "cut_mid_frame", "transport_error", "error_event", "stalled",
             "tool_call_unterminated"}
LOOP_PER_MIN = 10.0  # a killed run that asked more often than this was looping, not waiting
PROMPT = "Say hello"
SEED = "7"

PACKAGES = {"opencode": ["opencode-ai"], "codex": ["@openai/codex"],
            "claude": ["@anthropic-ai/claude-code"], "gemini": ["@google/gemini-cli"],
            "aisdk": ["ai", "@ai-sdk/openai", "@ai-sdk/anthropic"]}

# The minimal AI SDK agent: one streamText call; the text as it arrives, then the finish reason.
AISDK_SCRIPT = """\
import { streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
globalThis.AI_SDK_LOG_WARNINGS = false;
const api = process.argv[2] ?? 'chat';
const baseURL = process.env.BASE_URL;  // ...../v1 for both providers
const openai = createOpenAI({ baseURL, apiKey: 'sk-dummy' });
const model = api === 'messages' ? createAnthropic({ baseURL, apiKey: 'sk-dummy' })('claude-chaos')
  : api === 'responses' ? openai.responses('chaos-1') : openai.chat('chaos-1');
const result = streamText({ model, prompt: 'Say hello', maxOutputTokens: 1000,
  onError: ({ error }) => { console.error('onError:', String(error?.message ?? error)); } });
let failed = false;
for await (const part of result.fullStream) {
  if (part.type === 'text-delta') process.stdout.write(part.text ?? '');
  if (part.type === 'error') failed = true;
}
console.log(`\\n[finishReason=${await result.finishReason}]`);
process.exitCode = failed ? 1 : 0;
"""


@dataclass(frozen=True)
class Agent:
    """One agent: its protocol, the command line, and how a run directory points it at a base URL."""

    name: str
    api: str
    argv: tuple[str, ...]
    configure: Callable[[Path, str], dict[str, str]]  # (run dir, OpenAI-style base …/v1) -> env


def _opencode(run: Path, base: str) -> dict[str, str]:
    config = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
              "provider": {"chaos": {"npm": "@ai-sdk/openai-compatible", "name": "chaos",
                                     "options": {"baseURL": base, "apiKey": "sk-dummy"},
                                     "models": {"chaos-1": {"name": "chaos-1"}}}},
              "model": "chaos/chaos-1", "small_model": "chaos/chaos-1"}
    (run / "opencode.json").write_text(json.dumps(config, indent=2))
    return {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}


def _codex(run: Path, base: str) -> dict[str, str]:
    (run / "home" / ".codex").mkdir(parents=True, exist_ok=True)
    (run / "home" / ".codex" / "config.toml").write_text(
        'model = "chaos-1"\nmodel_provider = "guarded"\n\n[model_providers.guarded]\n'
        f'name = "guarded"\nbase_url = "{base}"\nenv_key = "GUARDED_API_KEY"\nwire_api = "responses"\n')
    return {"GUARDED_API_KEY": "sk-dummy"}


def _claude(run: Path, base: str) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": base.removesuffix("/v1"), "ANTHROPIC_API_KEY": "sk-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}


def _gemini(run: Path, base: str) -> dict[str, str]:
    (run / "home" / ".gemini").mkdir(parents=True, exist_ok=True)
    (run / "home" / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))
    return {"GOOGLE_GEMINI_BASE_URL": base.removesuffix("/v1"), "GEMINI_API_KEY": "dummy",
            "GEMINI_CLI_TRUST_WORKSPACE": "true"}


def _aisdk(run: Path, base: str) -> dict[str, str]:
    return {"BASE_URL": base}


def agents(npm: Path) -> dict[str, Agent]:
    """The agents by name; the AI SDK once per protocol."""
    def bin_(pkg: str, name: str) -> str:
        return str(npm / pkg / "node_modules" / ".bin" / name)
    table = [
        Agent("opencode", "chat", (bin_("opencode", "opencode"), "run", PROMPT), _opencode),
        Agent("codex", "responses",
              (bin_("codex", "codex"), "exec", "--skip-git-repo-check", PROMPT), _codex),
        # --bare: without it Claude Code 2.1.197 sends a role "system" message mid-conversation
        # (beta mid-conversation-system-2026-04-07), which chaos rejects as the public API's rules do.
        Agent("claude", "messages", (bin_("claude", "claude"), "--bare", "-p", PROMPT),
              _claude),
        # Gemini CLI routes every prompt through a non-streamed JSON-mode generateContent (its model
        # router) before the streamed answer: it needs chaos's JSON mode, or it retries for minutes.
        # On a bad ending it prints "[ERROR] …" and still exits 0 (see the run's tail).
        Agent("gemini", "gemini", (bin_("gemini", "gemini"), "-p", PROMPT), _gemini),
    ]
    for api in ("chat", "responses", "messages"):
        table.append(Agent(f"aisdk-{api}", api, ("node", str(npm / "aisdk" / "run.mjs"), api),
                           _aisdk))
    return {a.name: a for a in table}


@dataclass
class Result:
    """One run: what the agent did and what the upstream saw."""

    agent: str
    api: str
    fault: str
    mode: str
    exit: int | None  # None: killed at the bound
    seconds: float
    requests: int
    injected: dict[str, int]
    skipped: dict[str, int]
    verdict: str
    tail: str


def _start(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    """Start a sseguard server and return it with the URL it prints on its first line."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.startswith("{"):
        return proc, str(json.loads(line)["url"])
    for word in line.split():
        if word.startswith("http://"):
            return proc, word
    _stop(proc)
    raise RuntimeError(f"no URL from {argv[:3]}: {line!r}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def classify(fault: str, exit_code: int | None, seconds: float, requests: int) -> str:
    """Name what the agent did: error / hangs / loops / half answer / exit 0 / fine."""
    if exit_code is None:
        per_min = requests / seconds * 60.0 if seconds else 0.0
        if per_min >= LOOP_PER_MIN:
            return f"loops ({per_min:.0f} req/min)"
        return "hangs"
    if exit_code != 0:
        return "error"
    if fault == "healthy":
        return "fine"
    return "half answer, exit 0" if fault in CUTS_TEXT else "exit 0"


def _home(agent: Agent, npm: Path, run: Path) -> None:
    """The run's own HOME: a copy of the agent's warmed-up home where ``--setup`` made one."""
    warm = npm / "homes" / agent.name
    if warm.is_dir():
        shutil.copytree(warm, run / "home", symlinks=True)
    else:
        (run / "home").mkdir()


def _run_agent(agent: Agent, run: Path, base: str, bound: float) -> tuple[str, int | None, float]:
    """Run the agent headless against ``base`` in ``run``, killed (its process group) past
    ``bound`` seconds: its output, exit code (None: killed) and seconds."""
    # PWD too: opencode takes its project directory from $PWD, not from its working directory.
    env = {**os.environ, "HOME": str(run / "home"), "PWD": str(run), "NO_COLOR": "1",
           **agent.configure(run, base)}
    started = time.monotonic()
    proc = subprocess.Popen(list(agent.argv), cwd=run, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, errors="replace")
    try:
        out, _ = proc.communicate(timeout=bound)
        exit_code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        exit_code = None
    return out, exit_code, time.monotonic() - started


def run_one(agent: Agent, fault: str, mode: str, bound: float, sseguard: str,
            npm: Path, proxy_args: tuple[str, ...] = ()) -> Result:
    """One bounded run of one agent against one fault, directly or through the proxy."""
    with tempfile.TemporaryDirectory(prefix=f"agents-{agent.name}-") as tmp:
        run = Path(tmp)
        _home(agent, npm, run)
        chaos_argv = [sseguard, "chaos", "--listen", "127.0.0.1:0", "--seed", SEED, "--json"]
        if fault != "healthy":
            chaos_argv += ["--fault", f"{fault}=1"]
        if fault == "stalled":
            chaos_argv += ["--stall-ms", "600000", "--stall-then", "hang"]
        chaos, upstream = _start(chaos_argv, run)
        proxy = None
        try:
            base = upstream
            if mode == "proxy":
                proxy, base = _start([sseguard, "proxy", "--upstream", upstream,
                                      "--listen", "127.0.0.1:0", *proxy_args], run)
            out, exit_code, seconds = _run_agent(agent, run, base, bound)
            with urllib.request.urlopen(upstream.removesuffix("/v1") + "/chaos/stats") as reply:
                stats = json.load(reply)
        finally:
            if proxy is not None:
                _stop(proxy)
            _stop(chaos)
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return Result(agent.name, agent.api, fault, mode, exit_code, round(seconds, 1),
                  stats["requests"], stats["faults"], stats["skipped"],
                  classify(fault, exit_code, seconds, stats["requests"]), " | ".join(lines[-3:])[-300:])


#: The proxy's healing options the ``--heal`` runs measure (``--proxy-arg`` adds to them).
HEAL_PROXY_ARGS = ("--retry", "2", "--resume", "vllm,anthropic,openai-background")
#: The first-answer endings: a cut after half the answer, a failure before the first byte.
HEAL_ENDINGS = ("truncated", "http_error")


@dataclass
class HealResult:
    """One ``--heal`` run: what the agent did, what the proxy and the upstream saw."""

    agent: str
    ending: str  # the first answer's fault, or "healthy"
    mode: str
    seed: int
    exit: int | None
    seconds: float
    upstream: int  # requests chaos received (retries, continuations and readings included)
    client: int | None  # requests the proxy received from the agent (None: directly)
    healed_pass: int  # client streams the proxy healed that then passed
    healed_fail: int
    retries: int  # the proxy's retries (before the first byte)
    whole: bool  # the output holds the whole last answer of a conversation
    broken: int  # conversations whose first answer chaos broke
    retrievals: int
    proxy_args: list[str]
    tail: str


def _metric_sum(text: str, name: str, **labels: str) -> int:
    """The sum of a Prometheus counter's samples whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _words(text: str) -> str:
    return " ".join(re.sub(r"[*_`#>]", " ", text).split())


def run_heal(agent: Agent, ending: str, mode: str, seed: int, bound: float, sseguard: str,
             npm: Path, proxy_args: tuple[str, ...] = ()) -> HealResult:
    """One bounded run against a chaos that breaks each conversation's first answer (``ending``)
    once, directly or through the healing proxy."""
    with tempfile.TemporaryDirectory(prefix=f"heal-{agent.name}-") as tmp:
        run = Path(tmp)
        _home(agent, npm, run)
        chaos_argv = [sseguard, "chaos", "--listen", "127.0.0.1:0", "--seed", str(seed), "--json"]
        if ending != "healthy":
            chaos_argv += ["--first-answer", ending]
        if ending == "http_error":  # one status, the commonest overload answer
            (run / "chaos.toml").write_text("[fault_options]\nhttp_statuses = [503]\n")
            chaos_argv += ["--config", str(run / "chaos.toml")]
        chaos, upstream = _start(chaos_argv, run)
        proxy = None
        args = [*HEAL_PROXY_ARGS, *proxy_args]
        try:
            base = upstream
            if mode == "proxy":
                proxy, base = _start([sseguard, "proxy", "--upstream", upstream,
                                      "--listen", "127.0.0.1:0", *args], run)
            out, exit_code, seconds = _run_agent(agent, run, base, bound)
            root = upstream.removesuffix("/v1")
            with urllib.request.urlopen(root + "/chaos/stats") as reply:
                stats = json.load(reply)
            with urllib.request.urlopen(root + "/chaos/conversations") as reply:
                conversations = json.load(reply)
            metrics = ""
            if proxy is not None:
                with urllib.request.urlopen(base.removesuffix("/v1") + "/metrics") as reply:
                    metrics = reply.read().decode()
        finally:
            if proxy is not None:
                _stop(proxy)
            _stop(chaos)
    printed = _words(out)
    whole = any(c["last_text"] and _words(c["last_text"]) in printed
                for c in conversations.values())
    client = None
    if proxy is not None:
        client = (_metric_sum(metrics, "sseguard_proxy_requests_total", kind="stream")
                  + _metric_sum(metrics, "sseguard_proxy_requests_total", kind="non_stream"))
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return HealResult(
        agent.name, ending, mode, seed, exit_code, round(seconds, 1), stats["requests"], client,
        _metric_sum(metrics, "sseguard_proxy_healed_streams_total", result="passed"),
        _metric_sum(metrics, "sseguard_proxy_healed_streams_total", result="failed"),
        _metric_sum(metrics, "sseguard_proxy_retries_total"), whole,
        sum(1 for c in conversations.values() if c["broken"]), stats.get("retrievals", 0),
        args if proxy is not None else [], " | ".join(lines[-3:])[-300:])


def healed(r: dict[str, object], baseline: int | None) -> bool:
    """The agent got the whole answer, exit 0, from its one request: the proxy healed it."""
    return (r["mode"] == "proxy" and r["exit"] == 0 and bool(r["whole"])
            and baseline is not None and r["client"] == baseline
            and int(str(r["healed_pass"])) > 0 and r["healed_fail"] == 0)


def heal_table(path: Path) -> str:
    """The healed column of docs/agents.md: per agent, ending and mode, healed runs of all runs,
    and what the others did."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = ["| agent | first answer | mode | healed | runs: exit 0 whole / other; upstream req "
           "(client req) |", "|---|---|---|---|---|"]
    for name in dict.fromkeys(r["agent"] for r in rows):
        mine = [r for r in rows if r["agent"] == name]
        healthy = [r["client"] for r in mine if r["ending"] == "healthy" and r["mode"] == "proxy"
                   and r["exit"] == 0]
        baseline = max(set(healthy), key=healthy.count) if healthy else None
        for ending in ("healthy", *HEAL_ENDINGS):
            for mode in ("direct", "proxy"):
                runs = [r for r in mine if r["ending"] == ending and r["mode"] == mode]
                if not runs:
                    continue
                good = sum(healed(r, baseline) for r in runs)
                if ending == "healthy":  # nothing broke: no answer to compare, the exit says
                    whole0 = sum(1 for r in runs if r["exit"] == 0)
                    other = ", ".join(sorted({_heal_other(r) for r in runs if r["exit"] != 0}))
                else:
                    whole0 = sum(1 for r in runs if r["exit"] == 0 and r["whole"])
                    other = ", ".join(sorted({_heal_other(r) for r in runs
                                              if not (r["exit"] == 0 and r["whole"])}))
                reqs = sorted({f"{r['upstream']}" + (f" ({r['client']})" if r["client"] else "")
                               for r in runs})
                cell = "–" if mode == "direct" or ending == "healthy" else f"**{good}/{len(runs)}**"
                out.append(f"| {name} | {ending} | {mode} | {cell} | {whole0}/{len(runs)}"
                           f"{'; ' + other if other else ''}; {', '.join(reqs)} |")
    return "\n".join(out)


def _heal_other(r: dict[str, object]) -> str:
    """What a run that did not end whole did (and whether chaos ever broke its conversation)."""
    never = " before any answer broke" if r["ending"] != "healthy" and not r["broken"] else ""
    if r["exit"] is None:
        return f"killed at {r['seconds']} s{never}"
    if r["exit"] == 0:
        return f"half answer, exit 0{never}"
    return f"exit {r['exit']}{never}"


def setup(npm: Path) -> None:
    """Install the agents from npm into NPM_DIR/<agent> and write the AI SDK script."""
    for name, packages in PACKAGES.items():
        (npm / name).mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-fund", "--no-audit", *packages], cwd=npm / name,
                       check=True)
    (npm / "aisdk" / "run.mjs").write_text(AISDK_SCRIPT)
    # opencode installs its plugin package into ~/.config/opencode on a first start (5-20 s from
    # npm); a run copies this warm home instead, so that its time is the agent's, not npm's.
    version = json.loads((npm / "opencode" / "node_modules" / "opencode-ai" / "package.json")
                         .read_text())["version"]
    config = npm / "homes" / "opencode" / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    (config / "package.json").write_text(json.dumps(
        {"dependencies": {"@opencode-ai/plugin": version}}))
    subprocess.run(["npm", "install", "--no-fund", "--no-audit"], cwd=config, check=True)


def _cell(r: dict[str, object]) -> str:
    injected, skipped = r["injected"], r["skipped"]
    if r["fault"] != "healthy" and isinstance(injected, dict) and isinstance(skipped, dict) \
            and r["fault"] in skipped and r["fault"] not in injected:
        return "– (the protocol has no such ending)"
    code = r["exit"] if isinstance(r["exit"], int) else None
    verdict = classify(str(r["fault"]), code, float(str(r["seconds"])), int(str(r["requests"])))
    if code is None:
        return f"**{verdict}**: killed at {r['seconds']} s, {r['requests']} req"
    shown = f"**{verdict}**" if verdict.startswith("half") else verdict
    exit_ = "" if verdict.endswith("exit 0") else f", exit {code}"
    return f"{shown}{exit_}: {r['seconds']} s, {r['requests']} req"


def table(path: Path) -> str:
    """The Markdown tables of docs/agents.md, one per agent, from a results file."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out: list[str] = []
    for name in dict.fromkeys(r["agent"] for r in rows):
        mine = {(r["fault"], r["mode"]): r for r in rows if r["agent"] == name}  # the last run wins
        out += [f"### {name}", "", "| fault | direct | through the proxy |", "|---|---|---|"]
        for fault in FAULTS:
            cells = [_cell(mine[(fault, m)]) if (fault, m) in mine else "not measured"
                     for m in ("direct", "proxy")]
            out.append(f"| `{fault}` | {cells[0]} | {cells[1]} |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    """Parse the arguments; set up, run the matrix, or print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npm-dir", type=Path, default=Path("/work/agents-npm"))
    parser.add_argument("--setup", action="store_true")
    parser.add_argument("--agents", default="opencode,codex,claude,gemini,aisdk-chat,"
                                            "aisdk-responses,aisdk-messages")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--modes", default="direct,proxy")
    parser.add_argument("--timeout", type=float, default=40.0)
    parser.add_argument("--stall-timeout-run", type=float, default=90.0)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("agents.jsonl"))
    parser.add_argument("--proxy-arg", action="append", default=[],
                        help="an option for sseguard proxy (repeatable; default: none)")
    parser.add_argument("--table", type=Path)
    parser.add_argument("--heal", action="store_true",
                        help="measure healing: chaos breaks each conversation's first answer")
    parser.add_argument("--endings", default="healthy," + ",".join(HEAL_ENDINGS))
    parser.add_argument("--runs", type=int, default=5, help="--heal runs per cell (seeds 7, 8, …)")
    parser.add_argument("--heal-table", type=Path)
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.heal_table:
        print(heal_table(args.heal_table))
        return
    if args.setup:
        setup(args.npm_dir)
        return
    sseguard = shutil.which("sseguard") or str(Path(sys.executable).parent / "sseguard")
    known = agents(args.npm_dir)
    if args.heal:
        cells = [(known[a], e, m, 7 + i) for i in range(args.runs)
                 for e in args.endings.split(",") for a in args.agents.split(",")
                 for m in args.modes.split(",")]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool, \
                args.out.open("a") as sink:
            heal_futures = [pool.submit(run_heal, a, e, m, seed, args.timeout, sseguard,
                                        args.npm_dir, tuple(args.proxy_arg))
                            for a, e, m, seed in cells]
            for done in concurrent.futures.as_completed(heal_futures):
                got = done.result()
                sink.write(json.dumps(asdict(got)) + "\n")
                sink.flush()
                print(f"{got.agent:10} {got.ending:11} {got.mode:6} seed {got.seed}: exit "
                      f"{got.exit} {got.seconds} s, whole {got.whole}, upstream {got.upstream}, "
                      f"client {got.client}, healed {got.healed_pass}/{got.healed_fail}",
                      flush=True)
        return
    plan = [(known[a], f, m) for f in args.faults.split(",") for a in args.agents.split(",")
            for m in args.modes.split(",")]
    plan.sort(key=lambda p: p[1] != "stalled")  # the long runs first
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool, args.out.open("a") as sink:
        futures = [pool.submit(run_one, a, f, m,
                               args.stall_timeout_run if f == "stalled" else args.timeout, sseguard,
                               args.npm_dir, tuple(args.proxy_arg))
                   for a, f, m in plan]
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            sink.write(json.dumps(asdict(result)) + "\n")
            sink.flush()
            print(f"{result.agent:16} {result.fault:24} {result.mode:6} {_cell(asdict(result))}",
                  flush=True)


if __name__ == "__main__":
    main()
