"""Generated workloads: a scenario whose ``[workload] generate = N`` stands for N drawn workloads (pure).

What a draw covers, how a draw is named (``NAME.wK``, ``NAME@wK`` on a command line) and how the trials are
shared: docs/scenarios.md, ``[workload] generate``.  The draws are a function of ``[trials] seed`` alone
(:func:`harness.draws.seeded_draws`), so every machine and shard expands a scenario the same way.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from harness.draws import seeded_draws
from harness.scenario.model import (ANSWER_STOP_REASONS, OUTPUT_KINDS, REPLY_BLOCKS, Scenario, WorkloadSpec)

__all__ = ["workload_strategy", "expand", "expand_all", "split_draw", "DRAW_SEP"]

#: How a command line names one draw of a generated scenario: ``NAME@wK`` (or ``FILE.toml@wK``).
DRAW_SEP = "@w"
#: ``NAME@wK``, or the draw's scenario name ``NAME.wK`` (as reports write it).
_DRAW = re.compile(r"^(?P<base>.+)(?:" + re.escape(DRAW_SEP) + r"|\.w)(?P<k>\d+)$")


def workload_strategy() -> Any:
    """The :mod:`hypothesis` strategy of generated :class:`WorkloadSpec` s: what the bundled scenarios set one at a
    time (outputs at the 16 MiB record limit are left to ``payload-variety``: a draw holding them is ten times
    slower)."""
    from hypothesis import strategies as st

    blocks = st.lists(st.sampled_from(REPLY_BLOCKS), unique=True, max_size=3).map(tuple)
    return st.builds(
        WorkloadSpec,
        seed=st.integers(0, 9999),
        turns=st.integers(1, 4),
        tools_per_turn=st.integers(1, 4),
        tool_ms=st.sampled_from([(0.0, 0.0), (0.0, 2.0), (1.0, 5.0)]),
        model_ms=st.sampled_from([0.0, 0.0, 3.0, 25.0]),
        chat_followups=st.sampled_from([0, 0, 1]),
        outputs=st.lists(st.sampled_from(OUTPUT_KINDS), max_size=4).map(tuple),
        reply_blocks=st.lists(blocks, max_size=3).map(tuple),
        answer_stop_reasons=st.lists(st.sampled_from(ANSWER_STOP_REASONS), max_size=2).map(tuple),
        pause_turn=st.booleans(),
        cache_tokens=st.sampled_from([0, 0, 1000]),
        thinking=st.sampled_from(["", "", "adaptive"]),
        final_stop=st.sampled_from(["", "", "", "max_tokens", "refusal"]),
    ).map(lambda w: replace(w, final_stop="") if w.chat_followups else w)  # (a chat run reads its follow-ups)


def expand(scenario: Scenario) -> list[Scenario]:
    """The scenarios ``scenario`` stands for: itself, or one per draw K when it has ``generate`` N: named
    ``NAME.wK``, with its drawn workload (the drift and limits kept) and ``ceil(count / N)`` of the trials."""
    n, w = scenario.workload.generate, scenario.workload
    if not n:
        return [scenario]
    trials = replace(scenario.trials, count=max(1, math.ceil(scenario.trials.count / n)))
    out = []
    for k, spec in enumerate(seeded_draws(workload_strategy(), n, scenario.trials.seed)):
        spec = replace(spec if isinstance(spec, WorkloadSpec) else WorkloadSpec(), drift=w.drift,
                       max_tokens=w.max_tokens, max_iterations=w.max_iterations, generate=0)
        out.append(replace(scenario, name=f"{scenario.name}.w{k}", workload=spec, trials=trials, draw=k))
    return out


def expand_all(scenarios: list[Scenario]) -> list[Scenario]:
    """:func:`expand` of each, in order."""
    return [s for scenario in scenarios for s in expand(scenario)]


def split_draw(arg: str) -> tuple[str, int | None]:
    """``"NAME@w3"`` (or the draw's scenario name ``"NAME.w3"``, as reports write it) -> ``("NAME", 3)``;
    anything else -> ``(arg, None)``.  A caller tries the whole argument as a file or name first."""
    m = _DRAW.match(arg)
    return (m.group("base"), int(m.group("k"))) if m else (arg, None)
