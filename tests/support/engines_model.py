"""A model directory the engines can load without weights: a byte-level BPE tokenizer built here,
a chat template, and a tiny config. No hub, no download: only ``tokenizers`` and the file system.

Every marker of every family (and ``<think>``/``</think>``) is an added special token, as in the
real checkpoints where they are special, so the adapters' ``skip_special_tokens`` handling and the
reasoning parsers' token-id answers meet real ids.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from sseguard.core.toolcalls import families

EOS = "</s>"
#: ``chat_template_kwargs={"thinking": true}`` ends the prompt inside ``<think>`` (DeepSeek's way).
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "<|assistant|>{% if thinking is defined and thinking %}<think>{% endif %}")
_CORPUS = ["The weather in Paris is sunny. Let me check the file src/app.py for you.",
           '{"city": "Paris", "days": 2, "path": "src/app.py", "content": "def f(x):\\n    return x"}',
           "get_weather write_file read_file search functions arguments name parameter invoke"] * 20


ROLES = [EOS, "<|user|>", "<|assistant|>", "<|system|>", "<|tool|>"]


def special_tokens(*, tags: bool = True) -> list[str]:
    """The tokens written as one id: the roles and, with ``tags``, the think tags and every family's
    markers (without: they are byte-level text like any other, as in a vocabulary that lacks them)."""
    if not tags:
        return list(ROLES)
    marks: list[str] = []
    for fam in families().values():
        marks.extend(m for m in (*fam.markers, *fam.leak_markers) if m.strip())
    return list(dict.fromkeys([*ROLES, "<think>", "</think>", *marks]))


def token_pieces(tok: Tokenizer, text: str, size: int) -> list[str]:
    """``text`` in deltas of whole tokens of ``tok``, each at least ``size`` characters where it can
    be: what an engine sends (a special-token marker is never split)."""
    ends = [end for _, end in tok.encode(text, add_special_tokens=False).offsets]
    pieces: list[str] = []
    start = 0
    for end in ends:
        if end - start >= size:
            pieces.append(text[start:end])
            start = end
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def build_model_dir(path: Path, *, tags: bool = True, template: str = TEMPLATE) -> Path:
    """Write tokenizer.json, tokenizer_config.json and config.json for a tiny Qwen2-shaped model.
    ``tags``: the think tags and the families' markers are tokens of their own (``special_tokens``);
    ``template``: the chat template (a real model's, or the minimal one above)."""
    path.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special_tokens(tags=tags),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS, "pad_token": EOS, "bos_token": EOS,
        "chat_template": template, "model_max_length": 1 << 21, "clean_up_tokenization_spaces": False,
    }), encoding="utf-8")
    (path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "vocab_size": tok.get_vocab_size(), "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 1 << 21, "torch_dtype": "float32",
        "bos_token_id": None, "eos_token_id": tok.token_to_id(EOS), "tie_word_embeddings": True,
    }), encoding="utf-8")
    return path
