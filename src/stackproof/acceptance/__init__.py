"""`make acceptance` (`python -m stackproof.acceptance`, `stackproof acceptance run`): compare software
stacks on the local test cluster after checking the node profiles, and write the report.

Modules: driver (the command line and the steps in order, `plan_steps`), suite (the ReFrame part:
node checks per profile and the stack comparison in looks, each a session of
stackproof.reframe.session), provenance (how each stack's benchmarks were built), bench (`make
bench-acceptance`: time to verdict and the A/A check).

May import: basics, gpus/, nodes/, noise/, cluster/, spack/, stacks/, report/, provision/, reframe/
(every package below it). Only the CLI imports it.
"""
