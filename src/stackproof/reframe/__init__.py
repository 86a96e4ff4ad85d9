"""ReFrame, the harness of the acceptance suite: how stackproof runs it and what its checks share.

- check.py: StackCheck, the base of every check of reframe-tests/checks/ (its figures declared at
  init; one setup hook, one pre-run hook, the sanity function and one pre-performance hook, in a
  visible order: the stack and its launcher, the profile, the references, the job's size, the
  identity probe, the check's own conditions, each launch's figures); `blocks()` for a check whose
  launches run in blocks. What it uses, as plain functions: block.py (a block's launches in
  alternating order, their pair indices, the block file), stack.py (readiness, the stack's launcher,
  the one stack of the node checks), profile.py (the partition's core-specialization profile),
  identity.py (the identity probe's lines and their check), layout.py (nodes for a task count,
  process grids);
- launch.py: the block launcher, run inside the job (`python -m stackproof.reframe.launch
  block.json`): every launch of a block with its own stack's environment and launcher;
- session.py: the one way to run ReFrame (the target system and stacks, the readiness check once per
  run, the test cluster per profile, the `reframe` command line, one session in its own process
  group, the run outcome). `make reframe-run` (reframe-tests/run.py) and `make acceptance`
  (stackproof.acceptance) both call it. What ReFrame writes (its JSON report, the merge rule) is
  read by stackproof.reframe_output.

May import: basics, gpus/, nodes/, noise/, cluster/, spack/, stacks/, report/, provision/ (every
package below it) and ReFrame itself. Imported by acceptance/, reframe-tests/run.py and the checks
of reframe-tests/checks/ (ReFrame loads those; nothing in src/ imports a check).
"""
