"""One HPCC deck template (stacks/data/hpccinf.txt) for the check and the live test; HPL reads fixed
line positions, so the numbers land on the lines HPL reads them from, and nonsense is refused."""
import pytest

from stackproof.errors import InputError
from stackproof.stacks.hpccinput import hpcc_input


def test_numbers_land_on_the_lines_hpl_reads():
    lines = hpcc_input(1000, 64, 1, 2, "t").splitlines()
    assert lines[0] == "HPLinpack benchmark input file (t)"
    assert lines[5].split()[0] == "1000" and lines[5].split()[1] == "Ns"          # line 6: N
    assert lines[7].split()[0] == "64" and lines[7].split()[1] == "NBs"           # line 8: NB
    assert lines[10].split()[0] == "1" and lines[11].split()[0] == "2"            # lines 11, 12: P, Q
    assert lines[31].startswith("##### This line (no. 32) is ignored")


@pytest.mark.parametrize("kw", [dict(n=0), dict(nb=-1), dict(p=True), dict(q=1.5), dict(n=10**9)])
def test_nonsense_is_refused(kw):
    args = {**dict(n=1000, nb=64, p=1, q=2), **kw}
    with pytest.raises(InputError):
        hpcc_input(**args)


def test_a_title_is_one_line():
    with pytest.raises(InputError):
        hpcc_input(1000, 64, 1, 2, "a\nb")


def test_inner_repetitions_list_the_same_problem():
    lines = hpcc_input(4000, 96, 1, 2, "t", repeat=3).splitlines()
    assert lines[4].split()[0] == "3" and lines[5].split()[:4] == ["4000", "4000", "4000", "Ns"]
    for bad in (0, 21, True, 2.0):
        with pytest.raises(InputError):
            hpcc_input(4000, 96, 1, 2, "t", repeat=bad)
