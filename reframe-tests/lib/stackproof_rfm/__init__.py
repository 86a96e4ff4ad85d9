"""Shared pieces of the stackproof ReFrame checks: small single-purpose mixins (ReFrame
RegressionTestPlugin classes), each in its own module.

- StackEnvironment (stack.py): the stack the test measures, its launcher and benchmark binaries;
- StackReady (stack.py): a stack that is not installed skips the check with the install command;
- IdentityProbe (identity.py): each rank's MPI library, checked against the stack file;
- StackReferences (references.py): references/<stack>/<reference_file>;
- OutputParsing (parsing.py): stage files, benchmark output parsing, perf values;
- NodeProfile (profile.py): the core-specialization profile the partition runs (never switched
  by a check): a check for another profile is skipped with the command that provides it;
- FitsPartition (partition.py): a job larger than the partition is skipped, never left pending;
- Repeated (repeat.py): STACKPROOF_REPEAT separate launches of a performance check.
StackproofMixin combines them for a check that runs a stack's benchmark.
"""
from .identity import IDENTITY_LINE, IdentityProbe, identity_rows
from .parsing import OutputParsing
from .partition import FitsPartition, nodes_needed
from .profile import NodeProfile, cpu_bind_options, read_env_file, render_profile
from .references import REFERENCES, StackReferences, reference_path
from .repeat import Repeated, repeat_count
from .stack import StackEnvironment, StackLauncher, StackReady, launcher_name, not_ready
from .util import dims_create, stackproof_cmd, system_checks_stack

import reframe.utility.typecheck as typ                 # noqa: E402
from reframe.core.builtins import variable              # noqa: E402


class StackproofMixin(StackReady, StackEnvironment, NodeProfile, IdentityProbe, StackReferences, OutputParsing,
                      FitsPartition):
    """A check that measures a stack on the partition's nodes (every mixin above but Repeated)."""
    #: direction of each performance variable, {name or fnmatch pattern: 'higher' | 'lower'}: logged
    #: with the results so the report reads it from the check and never guesses it from the name.
    #: A check sets it by plain assignment in its class body.
    perf_better = variable(typ.Dict[str, str], value={}, loggable=True)


__all__ = ['FitsPartition', 'IDENTITY_LINE', 'IdentityProbe', 'NodeProfile', 'OutputParsing', 'REFERENCES',
           'Repeated', 'StackEnvironment', 'StackLauncher', 'StackReady', 'StackReferences', 'StackproofMixin',
           'cpu_bind_options', 'dims_create', 'identity_rows', 'launcher_name', 'nodes_needed', 'not_ready',
           'read_env_file', 'reference_path', 'render_profile', 'repeat_count', 'stackproof_cmd',
           'system_checks_stack']
