"""fiskj-harness: fault-injection campaigns that prove a journal engine right or catch it wrong.

Roles (after Jepsen): :mod:`harness.workload` (what the agent does: the fake
model server and the ledger tools), :mod:`harness.nemesis` (the faults),
:mod:`harness.history` (what was observed), :mod:`harness.checkers` (the
invariants, pure), :mod:`harness.runner` (wires them), :mod:`harness.scenario`
(scenarios as TOML data), :mod:`harness.report`.
"""
