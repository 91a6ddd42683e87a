"""The outside observer: record and fault every durability-relevant system call of any program.

A small ptrace tracer in C (``fiskj_observe.c``, built by :mod:`.build`) runs the
program with a seccomp-bpf filter that stops only the relevant calls, writes one
JSON line per call on a file under a root (:mod:`.ops` parses them) and injects
faults counted over the whole process tree.  docs/observer.md is the reference.

    proc = spawn_observed([sys.executable, "prog.py"], env=None, log=tmp / "log",
                          roots=[tmp / "data"], faults=["kill-after@3:write"])
    proc.wait()
    writes = [op for op in proc.ops() if op.op == "write"]
"""

from __future__ import annotations

from .build import observer_binary
from .errors import (BuildError, CompileFailed, CompilerMissing, ControlError, ControlTimeout, FaultSpecError,
                     LogFormatError, ObserverError, UnsupportedPlatform)
from .ops import (ACTIONS, DURABLE_KINDS, KINDS, FaultSpec, Op, OpList, entry_order, parse_fault, parse_op,
                  parse_ops)
from .run import ObservedProcess, Paused, spawn_observed

__all__ = ["ACTIONS", "DURABLE_KINDS", "KINDS", "BuildError", "CompileFailed", "CompilerMissing", "ControlError",
           "ControlTimeout", "FaultSpec", "FaultSpecError", "LogFormatError", "ObservedProcess", "ObserverError",
           "Op", "OpList", "Paused", "UnsupportedPlatform", "entry_order", "observer_binary", "parse_fault",
           "parse_op", "parse_ops", "spawn_observed"]
