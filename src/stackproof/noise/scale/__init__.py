"""Noise at scale: project one node's measured noise onto a bulk-synchronous application running
on thousands of nodes (`stackproof noise project`).

  noisemodel   a node's noise as a periodic timeline of detours (from an FWQ trace, or a signature)
               and the one operation the simulator needs: when does W us of work that starts at t end
  loggp        LogGP message costs (L, o, g, G), fitted from a stack's latency/bandwidth curve
  collectives  allreduce algorithms (binomial, recursive doubling, linear, dissemination) as vectorised
               completion-time recurrences over all nodes
  simulate     the bulk-synchronous loop (compute, then a collective; optionally overlapped) and slowdown
  sources      where a run keeps its FWQ traces and latency/bandwidth curves
  cli          the command, the sweep over scenarios, table / JSON / plot, and the report section

docs/noise.md ("Noise at scale") states the model, its assumptions and the checks that validate it.
"""
