"""Generated journals: realistic runs of a given size for the append and load sections."""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any, Iterable

from fiskj.codec import encode_record
from fiskj.fingerprint import make_fingerprint
from fiskj.records import AssistantRecord, MetaRecord, Record, TerminalRecord, ToolResultRecord


# --- generated journals ---------------------------------------------------------------------

_WORDS = ("the of and to in is was for on that with as by at from file line run tool result error value "
          "list read write open close count sum check path node data").split()
_FP = make_fingerprint(model="claude-sonnet-4-5", system="be brief", tools=[{"name": "ls"}, {"name": "cat"}],
                       max_tokens=10**9, max_iterations=10**9)


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(_WORDS)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)


def meta_record(run_id: str) -> MetaRecord:
    return MetaRecord(version=2, run_id=run_id, created="2026-11-30T01:02:03.123456789+00:00", fingerprint=_FP,
                      prompt="count the files and summarise them")


def generate_records(n: int, run_id: str = "bench", seed: int = 1) -> Iterable[Record]:
    """``n`` records of a plausible run (seq 1..n): meta, turns of an assistant with 1-2 tool_use
    blocks and their tool_results (~300 bytes a line on average), a final ``suspended`` terminal."""
    rng = random.Random(seed)
    yield dataclasses.replace(meta_record(run_id), seq=1)
    seq, it = 1, 0
    while seq < n - 1:
        room = n - 2 - seq  # slots left for tool_results before the terminal record
        ids = [f"toolu_{it:07d}_{j}" for j in range(min(rng.choice((1, 1, 2)), room))]
        content: list[dict[str, Any]] = [{"type": "text", "text": _text(rng, rng.randrange(10, 60))}]
        content += [{"type": "tool_use", "id": i, "name": rng.choice(("ls", "cat", "grep")),
                     "input": {"path": "/srv/data/" + rng.choice(_WORDS)}} for i in ids]
        seq += 1
        yield AssistantRecord(iteration=it, message={"role": "assistant", "content": content},
                              stop_reason="tool_use" if ids else "end_turn",
                              in_tokens=rng.randrange(100, 5000), out_tokens=rng.randrange(10, 500),
                              cache_read_tokens=rng.randrange(0, 1000), seq=seq)
        for i in ids:
            seq += 1
            yield ToolResultRecord(tool_use_id=i, result={"type": "tool_result", "tool_use_id": i,
                                                          "content": _text(rng, rng.randrange(10, 130)),
                                                          "is_error": False}, seq=seq)
        it += 1
    if n > 1:
        yield TerminalRecord(reason="suspended", seq=n)


def write_journal(path: str | os.PathLike[str], n: int, run_id: str = "bench", seed: int = 1) -> int:
    """Write a generated journal of ``n`` records to ``path`` (streaming); return its size in bytes."""
    size = 0
    with open(path, "wb", buffering=1 << 20) as f:
        for record in generate_records(n, run_id, seed):
            line = encode_record(record)
            f.write(line)
            size += len(line)
    return size
