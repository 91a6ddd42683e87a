"""fiskj-harness: fault-injection campaigns that prove a journal engine right or catch it wrong.

Roles (after Jepsen): :mod:`harness.workload.build` (what the agent does: the fake
model server and the ledger tools), :mod:`harness.runner.nemesis` (the faults),
:mod:`harness.history.model` (what was observed), :mod:`harness.checkers` (the
invariants, pure), :mod:`harness.runner.trial` (wires them), :mod:`harness.scenario.parse`
(scenarios as TOML data), :mod:`harness.report.report`.
"""
