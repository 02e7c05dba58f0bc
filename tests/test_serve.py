"""``sseguard._serve``: the --workers value, several processes on one port, and handing freed memory
back to the OS."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sseguard._serve import Listening, Worker, parse_workers, serve_workers
from sseguard.core.errors import ConfigError
from support.workers import die_after_listening, fail_in_second_worker

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_auto_workers_is_one_per_core() -> None:
    assert parse_workers("auto") == os.cpu_count()
    assert parse_workers(" AUTO ") == os.cpu_count()


@given(st.integers(min_value=1, max_value=10_000))
def test_a_positive_count_is_taken_as_written(n: int) -> None:
    assert parse_workers(str(n)) == n
    assert parse_workers(n) == n


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "", "2 workers", "0x2"])
def test_anything_else_is_a_one_line_config_error(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_workers(value)
    assert str(info.value) == f"--workers {value!r}: use a number of processes (1 or more) or auto"


@given(st.text())
def test_no_text_but_a_number_or_auto_is_accepted(value: str) -> None:
    if re.fullmatch(r"0*[1-9][0-9]*", value.strip(), re.ASCII) or value.strip().lower() == "auto":
        assert parse_workers(value) >= 1
    else:  # "²", "٣", "0", "": a one-line error, never a ValueError from int()
        with pytest.raises(ConfigError):
            parse_workers(value)


def test_one_worker_serves_in_the_calling_process() -> None:
    seen: list[tuple[Worker, int]] = []
    announced: list[Listening] = []

    def serve_one(worker: Worker, ready: object) -> None:
        seen.append((worker, os.getpid()))
        assert callable(ready)
        ready(4321)

    assert serve_workers(1, "127.0.0.1", 0, serve_one, announced.append) == 0
    assert seen == [(Worker(0, 1, "127.0.0.1", 0), os.getpid())]
    assert not seen[0][0].reuse_port
    assert [(a.host, a.port, a.url) for a in announced] == [("127.0.0.1", 4321, "http://127.0.0.1:4321/v1")]


def test_several_workers_without_so_reuseport_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(socket, "SO_REUSEPORT", raising=False)
    started: list[Worker] = []
    with pytest.raises(ConfigError) as info:
        serve_workers(2, "127.0.0.1", 0, lambda worker, ready: started.append(worker), print)
    assert "needs SO_REUSEPORT" in str(info.value) and "--workers 1" in str(info.value)
    assert started == []


def test_a_busy_port_fails_before_any_worker_starts() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OSError):
            serve_workers(2, "127.0.0.1", port, fail_in_second_worker, print)


def test_a_worker_that_cannot_start_stops_the_others_and_reports_its_reason() -> None:
    announced: list[Listening] = []
    with pytest.raises(ConfigError) as info:
        serve_workers(2, "127.0.0.1", 0, fail_in_second_worker, announced.append)
    assert str(info.value) == "worker 1 cannot open its store"
    assert announced == []  # never announced as listening
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR") is None  # the workers' metrics dir is gone


def test_a_worker_that_dies_later_stops_the_others_and_the_status_says_so() -> None:
    announced: list[Listening] = []
    assert serve_workers(2, "127.0.0.1", 0, die_after_listening, announced.append) == 1
    assert len(announced) == 1 and announced[0].port > 0


_RSS = """
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:"))
survivors, blocks = [], []
"""


def _freed_mib(script: str) -> float:
    """Run ``script`` in a fresh interpreter (allocator state is process-wide) and read the MiB it
    prints."""
    result = subprocess.run([sys.executable, "-c", _RSS + textwrap.dedent(script)], capture_output=True,
                            text=True, timeout=60, check=True)
    return float(result.stdout)


@pytest.mark.skipif(not GLIBC, reason="malloc_trim and mallopt are glibc's")
def test_freed_heap_blocks_go_back_to_the_os_when_asked() -> None:
    freed = _freed_mib("""
        from sseguard._serve import release_free_memory
        for _ in range(2000):  # 100 kB blocks (under glibc's default mmap threshold) between survivors
            blocks.append(bytearray(100_000))
            survivors.append(bytearray(2_000))
        del blocks
        kept = rss()
        assert release_free_memory() is True
        print(kept - rss())
    """)
    assert freed > 100  # of the ~200 MB freed, the heap had kept at least half until asked


@pytest.mark.skipif(not GLIBC, reason="malloc_trim and mallopt are glibc's")
def test_with_large_blocks_mapped_freeing_them_lowers_rss_at_once() -> None:
    freed = _freed_mib("""
        from sseguard._serve import map_large_blocks
        assert map_large_blocks(64 * 1024)
        for _ in range(2000):
            blocks.append(bytearray(100_000))
            survivors.append(bytearray(2_000))
        full = rss()
        del blocks
        print(full - rss())
    """)
    assert freed > 150  # ~200 MB of blocks freed, no trim needed


def test_settling_the_collector_freezes_what_exists_and_collects_young_objects_less_often() -> None:
    import gc

    from sseguard._serve import settle_gc

    before = gc.get_threshold()
    try:
        settle_gc(12_345)
        assert gc.get_threshold() == (12_345, 20, 20)
        assert gc.get_freeze_count() > 0
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
