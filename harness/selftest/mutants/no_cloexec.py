"""Mutant ``no-cloexec``: the lock descriptor is inherited by tool subprocesses.

Tool subprocesses must not inherit the lock (docs/spec.md section 10,
rule 3): a child that outlives its SIGKILLed holder keeps the run locked.
Python opens descriptors close-on-exec (PEP 446); the patch undoes that.
Caught by the race ``lock-survives-other-fds`` (the other writer cannot
take the run over).
"""

from __future__ import annotations

NAME = "no-cloexec"
DEFECT = "the lock descriptor is not close-on-exec: a tool child keeps the run locked"
FAMILY = "race"
RACE = "lock-survives-other-fds"


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
