"""Repetition of performance checks: STACKPROOF_REPEAT (default 5) separate launches each."""
import os

import reframe as rfm
from reframe.core.builtins import parameter


def repeat_count():
    """STACKPROOF_REPEAT (default 5): how many separate launches each performance check makes."""
    value = os.environ.get('STACKPROOF_REPEAT', '5')
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f'STACKPROOF_REPEAT={value!r}: expected a positive integer')
    return int(value)


class Repeated(rfm.RegressionTestPlugin):
    """Performance checks are repeated as separate launches (a repetition is a separate job; ReFrame
    runs each repetition for every stack before the next one, so the stacks interleave)."""
    repeat_index = parameter(range(repeat_count()), loggable=True)
