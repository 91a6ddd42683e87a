"""fiskj-harness: fault-injection campaigns that prove a journal engine right or catch it wrong.  One folder
per role: docs/architecture.md "harness: one folder per role"."""
