"""Conversation lengths from a ShareGPT-format JSON file, for a KV-cache run to replay.

The format (a list of ``{"id", "conversations": [{"from": "human"|"gpt", "value"}...]}``)
and the token counts without a tokenizer (characters / 4, context capped at 16,384 tokens and
output at 2,048) are upstream's ``ShareGPTDatasetLoader`` (mlcommons/storage
``kv_cache_benchmark/kv_cache/workload.py``@23aa82ed). Only the lengths are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dliobench.base.errors import InputError

MAX_CONTEXT, MAX_OUTPUT = 16384, 2048


def _turns(conversation: Any) -> list[tuple[int, int]]:
    """(context, output) tokens of each human-then-gpt pair of one conversation."""
    turns = conversation.get("conversations") if isinstance(conversation, dict) else None
    if not isinstance(turns, list):
        return []
    out = []
    for human, gpt in zip(turns[::2], turns[1::2], strict=False):
        if not (isinstance(human, dict) and isinstance(gpt, dict)):
            continue
        if human.get("from") != "human" or gpt.get("from") != "gpt":
            continue
        out.append((min(MAX_CONTEXT, max(1, len(str(human.get("value", ""))) // 4)),
                    min(MAX_OUTPUT, max(1, len(str(gpt.get("value", ""))) // 4))))
    return out


def load(path: str, max_conversations: int, users: int) -> list[list[tuple[int, int]]]:
    """The first conversations with at least one turn, one per user (at most ``users``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read kvcache.dataset_path {path}: {exc.strerror}; give a "
                         "ShareGPT-format JSON file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"kvcache.dataset_path {path} is not JSON ({exc}); give a "
                         "ShareGPT-format JSON file") from None
    if not isinstance(data, list):
        raise InputError(f"kvcache.dataset_path {path} is not a list of conversations; give "
                         "a ShareGPT-format JSON file")
    found = [t for t in (_turns(c) for c in data[:max_conversations]) if t]
    if not found:
        raise InputError(f"kvcache.dataset_path {path} has no human/gpt turn pairs; give a "
                         "ShareGPT-format JSON file")
    return found[:users]
