"""What `pip install sseguard[…]` puts on a machine: site-packages size and distribution count.

Each spec is installed into a fresh venv of its own (``python -m venv``, pip upgraded first), then
measured: the bytes under site-packages and the distributions there, each with its own size (read from
its RECORD), largest first; both also without what every fresh venv holds before anything is installed
(pip, and setuptools on Python 3.11), which is what the spec itself adds.
Comparing two trees (issue 49's before and after) is two specs pointing at two checkouts:

    python -m bench.cli.bench_install ~/.cache/sseguard/baseline-main '.' '.[all]' --top 12

The venvs live in a temporary directory removed at the end (``--keep DIR`` keeps them there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: What a fresh venv holds before anything is installed into it.
BOOTSTRAP = ("pip", "setuptools")
#: Reads each installed distribution's size from its RECORD, inside the measured venv.
_SIZES = r"""
import importlib.metadata as md, json
rows = {}
for dist in md.distributions():
    size = 0
    for file in dist.files or ():
        try:
            size += file.locate().stat().st_size
        except OSError:
            pass
    rows[dist.metadata["Name"]] = size
print(json.dumps(rows))
"""


def _tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file removed while walking
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _pip(python: str, *args: str) -> None:
    """``pip install -q``; its output only when it fails (the machine's pip config may warn per
    package about an index location it lacks)."""
    done = subprocess.run([python, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"pip install {' '.join(args)} failed")


def measure(spec: str, where: Path) -> dict[str, object]:
    """Install ``spec`` into a fresh venv at ``where``; its sizes and distributions."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = str(where / "bin" / "python")
    _pip(python, "--upgrade", "pip")
    start = time.monotonic()
    _pip(python, spec)
    seconds = time.monotonic() - start
    site = next((where / "lib").glob("python3*/site-packages"))
    sizes: dict[str, int] = json.loads(subprocess.run([python, "-c", _SIZES], check=True,
                                                      capture_output=True, text=True).stdout)
    total = _tree_size(site)
    own = [name for name in sizes if name.lower() not in BOOTSTRAP]
    return {"spec": spec, "site_packages_bytes": total,
            "added_bytes": total - sum(sizes[n] for n in sizes if n.lower() in BOOTSTRAP),
            "distributions": len(sizes), "added_distributions": len(own), "install_s": round(seconds, 1),
            "sizes": dict(sorted(sizes.items(), key=lambda kv: -kv[1]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="+", help="what to pip install: a path, 'PATH[extra]', a name")
    parser.add_argument("--top", type=int, default=10, help="the largest distributions shown per spec")
    parser.add_argument("--json", dest="as_json", action="store_true", help="the full result as JSON")
    parser.add_argument("--keep", type=Path, help="build the venvs here and keep them")
    args = parser.parse_args(argv)
    base = args.keep or Path(tempfile.mkdtemp(prefix="sseguard-install-"))
    results = []
    try:
        for number, spec in enumerate(args.specs):
            results.append(measure(spec, base / f"venv{number}"))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.as_json:
        print(json.dumps(results, indent=2))
        return 0
    for result in results:
        sizes: dict[str, int] = result["sizes"]  # type: ignore[assignment]
        print(f"{result['spec']}: {result['site_packages_bytes'] / 1e6:.1f} MB site-packages in "
              f"{result['distributions']} distributions; added to a fresh venv: "
              f"{result['added_bytes'] / 1e6:.1f} MB in {result['added_distributions']} "
              f"(installed in {result['install_s']} s)")
        for name, size in list(sizes.items())[:args.top]:
            print(f"  {size / 1e6:8.1f} MB  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
