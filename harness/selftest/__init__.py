"""The harness's self-test: deliberately broken variants of fiskj that the suite must catch.

* :mod:`harness.selftest.mutants`: every mutant, one module each (agent
  loop, durability, tails and races alike), applied in a child process by
  importing it (``FISKJ_PRELOAD``);
* :mod:`harness.selftest.targets`: which bundled scenario must catch which mutant;
* :mod:`harness.selftest.run`: the self-test runner (``fiskj-harness mutants``);
* :mod:`harness.selftest.subject`: the mutant subject, ``python -m harness.selftest.subject``.

Nothing outside this package and the command line imports it: a child
names its mutant's module in its environment instead.
"""
