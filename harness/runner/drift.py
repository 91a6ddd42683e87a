"""A drifted resume's run configuration (``[workload] drift``; docs/workload.md): the fingerprint fields a
resume changes so that a fisk-ai-style agent must refuse it (docs/spec.md section 7)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.subject.contract import RunConfig

__all__ = ["drifted_config"]


def drifted_config(cfg: RunConfig, drift: tuple[str, ...], tools_file: str, system_file: str = "") -> RunConfig:
    """``cfg`` with the fingerprint fields named in ``drift`` changed (``[workload] drift``).

    ``model`` gets a ``-drifted`` suffix, ``max_tokens`` and ``max_iterations``
    one more, ``tools`` the tool file ``tools_file`` (same tools, other
    descriptions), ``system`` the system prompt file ``system_file`` (the run
    started with none), ``thinking`` the mode ``adaptive`` (``enabled:2048`` when it
    started with ``adaptive``).  The fake model server ignores the model name and the
    system prompt, and the thinking mode only decides whether a request
    that continues a tool loop must send that turn's thinking block first
    (as the Messages API does), so a forced resume with drift gives the
    same conversation.
    """
    changes: dict[str, Any] = {"model": cfg.model + "-drifted", "max_tokens": cfg.max_tokens + 1,
                               "max_iterations": cfg.max_iterations + 1, "tools_file": tools_file,
                               "system_file": system_file,
                               "thinking": "enabled:2048" if cfg.thinking == "adaptive" else "adaptive"}
    named = {"tools_file": "tools", "system_file": "system"}  # (a drift names the others as the field)
    return replace(cfg, **{f: value for f, value in changes.items() if named.get(f, f) in drift})
