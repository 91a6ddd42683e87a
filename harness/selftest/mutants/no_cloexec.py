"""Mutant ``no-cloexec``: the lock descriptor is inherited by tool subprocesses.

Tool subprocesses must not inherit the lock (docs/spec.md section 10,
rule 3): a child that outlives its SIGKILLed holder keeps the run locked.
Python opens descriptors close-on-exec (PEP 446); the patch undoes that.
fiskj's tools run with ``close_fds`` (subprocess's default), so no campaign
sees it: the unit tests of tests/test_lock.py catch it (field case F18: a
long-lived child that inherits every inheritable descriptor outlives its
SIGKILLed holder, and the other writer cannot take the run over).
"""

from __future__ import annotations

NAME = "no-cloexec"
DEFECT = "the lock descriptor is not close-on-exec: a tool child keeps the run locked"
FAMILY = "unit"


def apply() -> None:
    import os

    from fiskj import lock, store

    real = lock.acquire

    def acquire(path, run_id):  # Python opens descriptors close-on-exec (PEP 446); undo that
        held = real(path, run_id)
        os.set_inheritable(held.fd, True)
        return held

    lock.acquire = acquire
    store.acquire = acquire  # store imported the name: patch its copy too


apply()  # a preload: importing this module applies the patch (in a child process only)
