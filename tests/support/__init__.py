"""Helpers shared by the tests and by ``benchmarks/`` (which import them from here,
never from a test module): no tests are collected in this package.

Why here and not in ``scalepca.testing``: these helpers start and kill dask and SLURM
processes, drive the command line and wait for fault points; they test the application
from above (they import ``scalepca.cli``) and are no use to a user of the library, so
inside the package they would run against its floors and ship in every wheel. The
benchmarks run from a checkout (they add the repository root to ``sys.path``), as the
process clusters here do for their workers, which unpickle the gated reads of
:mod:`tests.support.reliability` by reference.

- :mod:`.compare` — how the tests compare results: signs of modes, closeness,
  subspaces, whole fits.
- :mod:`.touched` — a pytest plugin listing the modules of scalepca a run exercised
  (the quick tier's check).
- :mod:`.reliability` — the estimator table, fit summaries, the loopback process
  cluster, the gates and the killers (faults, determinism, checkpoints, interrupted
  writes).
- :mod:`.bad_input` — the bad-input table (input × estimator, and the CLI rows) and its
  markdown (``docs/bad_input.md``).
- :mod:`.interrupted_writes` — writers SIGKILLed mid-write and what they leave behind.
- :mod:`.slurm` — a single-node SLURM on loopback (the ``slurm`` fixture).
- :mod:`.hosts` — emulated hosts: network namespaces on a bridge, tbf-capped links, the
  scheduler and an S3 server in namespaces of their own (``tests/test_hosts.py``,
  ``benchmarks/multihost.py``).
- :mod:`.processes` — free loopback ports and ending a child process.
"""
