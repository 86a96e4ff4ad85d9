"""StackReferences: a check's references come from references/<stack>/<reference_file>
(RFM_REFERENCE_PREFIX moves the root, e.g. to a site's own repository holding <stack>/*.yaml).
A check that names a reference file for a stack that has none gets no reference (ReFrame then
logs the value without judging it); tests/test_reframe_suite.py checks that every named file
exists for every stack file of the project."""
import os

import reframe as rfm
import reframe.core.runtime as rt
from reframe.core.builtins import run_after

from stackproof.paths import REPO

REFERENCES = REPO / 'reframe-tests' / 'references'


def reference_path(stack, reference_file):
    """(path on disk, value for `reference = {'$ref': ...}`) of a stack's reference file."""
    prefix = rt.runtime().get_option('general/0/reference_prefix')
    rel = os.path.join(stack, reference_file)
    path = os.path.join(prefix or str(REFERENCES), rel)
    return path, (rel if prefix else path)


class StackReferences(rfm.RegressionTestPlugin):
    #: file name under references/<stack>/ holding this test's references (None: no references)
    reference_file = None

    @run_after('setup')
    def _stack_references(self):
        stack = self.current_environ.extras.get('stack')
        if not self.reference_file or not stack:
            return
        path, ref = reference_path(stack, self.reference_file)
        if os.path.isfile(path):
            self.reference = {'$ref': ref}
