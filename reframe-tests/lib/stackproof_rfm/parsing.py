"""OutputParsing: files of the stage directory, benchmark output parsed by stackproof.benchparse
(malformed output fails sanity naming the file), performance variables from parsed numbers."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from stackproof.benchparse import BenchParseError, parse_file


class OutputParsing(rfm.RegressionTestPlugin):
    def stage_file(self, name=None):
        """Absolute path of a file in the stage directory (default: the job's stdout)."""
        return os.path.join(self.stagedir, name or self.job.stdout)

    def set_perf_values(self, values):
        """Performance variables from already parsed numbers: {name: (value, unit)}; a None value
        (a quantity this output does not print) is left out."""
        self.perf_variables = {name: sn.make_performance_function(lambda v=v: v, unit)
                               for name, (v, unit) in values.items() if v is not None}

    def parse_output(self, kind, name=None):
        """Parse benchmark output with stackproof.benchparse; malformed output fails sanity with
        the file and what was expected. Cached per file."""
        path = self.stage_file(name)
        cache = self.__dict__.setdefault('_stackproof_parsed', {})
        if path not in cache:
            try:
                cache[path] = parse_file(kind, path)
            except BenchParseError as exc:
                raise SanityError(str(exc)) from None
        return cache[path]

    @sn.deferrable
    def parsed_ok(self, kind, name=None):
        """Deferred: the output parses (the parser's error, naming the file, is the failure reason)."""
        self.parse_output(kind, name)
        return True
