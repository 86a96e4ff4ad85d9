"""ReFrame, the harness of the acceptance suite: how stackproof runs it and what its checks share.

- session.py: the one way to run ReFrame (the target system and stacks, the readiness check once per
  run, the test cluster per profile, the `reframe` command line, one session in its own process
  group, the one rule that merges the sessions' reports, the run outcome). `make reframe-run`
  (reframe-tests/run.py) and `make acceptance` (stackproof.acceptance) both call it.

May import: every package below it (provision, report, stacks, spack, cluster, noise, nodes, gpus,
basics) and ReFrame itself; imported by acceptance/, reframe-tests/run.py and the checks of
reframe-tests/checks/ (ReFrame loads those; nothing in src/ imports a check).
"""
