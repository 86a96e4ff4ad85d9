"""ReFrame, the harness of the acceptance suite: how stackproof runs it and what its checks share.

- check.py: StackCheck, the base of every check of reframe-tests/checks/ (one setup hook, one pre-run
  hook and the sanity function, in a visible order: the stack and its launcher, the profile, the
  references, the job's size, the identity probe, the check's own conditions, its measured values);
  `repeats()` for a check repeated as separate launches. What it uses, as plain functions: stack.py
  (readiness, the stack's launcher, the one stack of the node checks), profile.py (the partition's
  core-specialization profile), identity.py (the identity probe's lines and their check),
  layout.py (nodes for a task count, process grids);
- reports.py: a session's JSON report, and merge_reports, the one rule that makes one report of
  several sessions;
- session.py: the one way to run ReFrame (the target system and stacks, the readiness check once per
  run, the test cluster per profile, the `reframe` command line, one session in its own process
  group, the one rule that merges the sessions' reports, the run outcome). `make reframe-run`
  (reframe-tests/run.py) and `make acceptance` (stackproof.acceptance) both call it.

May import: basics, gpus/, nodes/, noise/, cluster/, spack/, stacks/, report/, provision/ (every
package below it) and ReFrame itself. Imported by acceptance/, reframe-tests/run.py and the checks
of reframe-tests/checks/ (ReFrame loads those; nothing in src/ imports a check).
"""
