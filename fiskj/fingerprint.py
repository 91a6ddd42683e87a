"""The resume guard: a fingerprint of the configuration a run was started with.

Source: docs/spec.md section 4 (fingerprint) and section 12, rules 3 and 4 (fisk-ai's
"The resume guard"; docs/spec.md "Sources").  Resuming is
refused when the fingerprint differs; :func:`diff` names each changed field.
The system prompt and tool definitions are stored only as SHA-256 hex of
their canonical JSON encoding (sorted keys, no spaces, UTF-8), never as text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fingerprint", "canonical_json", "sha256_hex", "make_fingerprint", "diff", "FIELDS"]

#: Fingerprint fields in wire order.
FIELDS = ("model", "system_hash", "tools_hash", "thinking_mode", "max_tokens", "max_iterations")


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The six fields of the v2 fingerprint; unknown wire fields are kept in ``extra``."""

    model: str
    system_hash: str
    tools_hash: str
    thinking_mode: str
    max_tokens: int
    max_iterations: int
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """Return the wire object (field order as docs/spec.md section 4, then ``extra``)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in FIELDS}
        out.update(self.extra)
        return out


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as canonical JSON bytes: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def sha256_hex(value: Any) -> str:
    """Return the lowercase hex SHA-256 of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def make_fingerprint(
    *,
    model: str,
    system: str,
    tools: list[dict[str, Any]],
    thinking_mode: str = "off",
    max_tokens: int,
    max_iterations: int,
) -> Fingerprint:
    """Build a fingerprint from a run's configuration.

    ``system`` is the system prompt text, ``tools`` the list of tool
    definitions as sent to the model (``name``, ``description``,
    ``input_schema``); ``max_tokens`` is the run's token budget (all kinds
    summed) and ``max_iterations`` its iteration cap.
    """
    return Fingerprint(
        model=model,
        system_hash=sha256_hex(system),
        tools_hash=sha256_hex(tools),
        thinking_mode=thinking_mode,
        max_tokens=max_tokens,
        max_iterations=max_iterations,
    )


def diff(stored: Fingerprint, current: Fingerprint) -> list[str]:
    """Return one line per field that differs, e.g. ``"model: 'm1' -> 'm2'"``.

    Hash fields are described without the hashes' meaning (``"system prompt
    changed (system_hash 3b1f... -> 9c2e...)"``).  An empty list means the
    fingerprints match.
    """
    lines = []
    for name in FIELDS:
        old, new = getattr(stored, name), getattr(current, name)
        if old == new:
            continue
        if name == "system_hash":
            lines.append(f"system prompt changed (system_hash {old[:12]}... -> {new[:12]}...)")
        elif name == "tools_hash":
            lines.append(f"tool set changed (tools_hash {old[:12]}... -> {new[:12]}...)")
        else:
            lines.append(f"{name}: {old!r} -> {new!r}")
    return lines
