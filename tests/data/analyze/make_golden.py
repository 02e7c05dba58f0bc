"""Golden analyses from the in-memory path, run once on a checkout of 2390d50 (before the engines),
with one change applied there: counts of equal size listed by name (``stats.ranked``), where the old
code listed them in record order, which counts from an engine cannot reproduce. Run from the repository
root with that checkout's ``src`` first on PYTHONPATH, and a demo run directory as the argument."""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, "tests")
import msgspec

from sseguard.analyze import analyze, load_records
from sseguard.core.policy import Policy
from support.analyze import every_kind

out = Path("tests/data/analyze")
enc = msgspec.json.Encoder()
recs = every_kind()
(out / "every_kind.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in recs))
demo = Path(sys.argv[1]) if len(sys.argv) > 1 else None
sets = {"every_kind": recs}
if demo:
    files = sorted(demo.glob("*.jsonl"))
    shutil.copy(files[0], out / "demo.jsonl")
    sets["demo"] = load_records([str(out / "demo.jsonl")])
for name, rs in sets.items():
    for pol, tol in (("strict", None), ("strict", "missing_usage,truncated")):
        a = analyze(rs, Policy.from_spec(pol, tol))
        tag = f"{name}.{pol}{'-tol' if tol else ''}"
        (out / f"{tag}.golden.json").write_text(json.dumps(a.to_dict(), indent=1, ensure_ascii=False))
        print(tag, a.requests, a.total.failed, a.headlines[:3])
