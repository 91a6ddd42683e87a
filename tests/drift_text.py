"""One scenario text several tests share: a kill, then a resume with another model (pure data).

A correct agent refuses the drifted resume; the mutant ``fingerprint-ignores-model`` accepts it (I9).
Deterministic: an event kill.  :func:`drift_scenario` names it for the test that writes it.
"""

from __future__ import annotations

import sys

#: The mutant subject with the resume guard that ignores the model: one I9 violation on the scenario.
BROKEN = f"FISKJ_MUTANT=fingerprint-ignores-model {sys.executable} -m harness.selftest.subject"


def drift_scenario(name: str) -> str:
    """The TOML text of the drift scenario, named ``name``."""
    return f'''name = "{name}"
purpose = "a kill, then a resume with another model that must be refused"

[workload]
turns = 2
tools_per_turn = 1
tool_ms = 1
drift = ["model"]

[faults]
family = "kill"
schedule = [{{kind = "kill", event = 12}}]

[trials]
count = 1
'''
