"""The outside observer: record and fault every durability-relevant system call of any program, from a small
ptrace tracer in C (``fiskj_observe.c``); docs/observer.md is the reference.
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
