"""The harness's self-test: deliberately broken variants of fiskj that the suite must catch.

* :mod:`harness.selftest.mutants`: the one table of mutants (name, defect,
  family, target scenario, expected invariants, patch) and the preload that
  applies one, by name, in a child process (``FISKJ_MUTANT``, ``FISKJ_PRELOAD``);
* :mod:`harness.selftest.patches`: the patches, plain functions grouped by
  technique (fingerprint, tails, lock, loop, store, reader);
* :mod:`harness.selftest.targets`: which bundled scenario must catch which
  bug variant of the foreign subject (subjects/node/);
* :mod:`harness.selftest.run`: the self-test runner (``fiskj-harness mutants``);
* :mod:`harness.selftest.subject`: the mutant subject, ``python -m harness.selftest.subject``.

Nothing outside this package and the command line imports it: a child
names the preload in its environment instead.
"""
