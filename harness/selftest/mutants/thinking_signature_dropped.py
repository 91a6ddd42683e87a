"""Mutant ``thinking-signature-dropped``: the journal keeps a thinking block's text but not its signature.

A model reply's blocks are journaled with every field the model sent
(docs/spec.md section 3), a ``thinking`` block's ``signature`` included:
the Messages API refuses a thinking block sent back without it.  This
writer serializes thinking blocks through a model that has no signature
field.  The live leg keeps the blocks it received, so an uninterrupted run
goes well; a resumed one rebuilds the conversation from the journal, sends
the thinking blocks unsigned, is refused (HTTP 400) and cannot finish (I6).
"""

from __future__ import annotations

NAME = "thinking-signature-dropped"
DEFECT = "the writer drops the signature of thinking blocks, so a resume sends them back unsigned"
FAMILY = "kill"


def apply() -> None:
    from fiskj import encode
    from fiskj.records import AssistantRecord

    from harness.selftest.mutants._patch import wrap

    @wrap(encode, "_payload")
    def _payload(original, record):
        out = original(record)
        content = out["message"].get("content") if isinstance(record, AssistantRecord) else None
        if isinstance(content, list):  # the bug: a thinking block is written as {thinking, type}
            out["message"] = {**out["message"], "content": [
                {k: v for k, v in b.items() if k != "signature"} if isinstance(b, dict) and b.get("type") == "thinking"
                else b for b in content]}
        return out


apply()  # a preload: importing this module applies the patch (in a child process only)
