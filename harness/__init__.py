"""fiskj-harness: fault-injection campaigns that prove a journal engine right or catch it wrong.

One folder per role (docs/architecture.md): :mod:`harness.subject` (the
contract an agent under test meets), :mod:`harness.observer` (records and
faults any agent from outside its process), :mod:`harness.workload` (the
fake model server and the ledger tools), :mod:`harness.runner` (the one leg
runner), :mod:`harness.families` (the fault families: signals, tail, power
loss, races), :mod:`harness.history` (what was observed),
:mod:`harness.checkers` (the only judges, pure), :mod:`harness.scenario`
(scenarios as TOML data), :mod:`harness.campaign`, :mod:`harness.report`,
:mod:`harness.selftest` (mutants that must be caught), :mod:`harness.cli`.
"""
