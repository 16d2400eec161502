"""Every registered op's mapping, run with the project's stand-in in place of SGLang's function.

The stand-ins re-implement SGLang's conventions in plain torch, so on the CPU this runs each family
module's mapping, the plugin and the judge on every drawn case of the op's sweeps: each must match.
"""


import pytest

pytestmark = pytest.mark.dsv4_standin


def test_standin(dsv4_op_case):
    dsv4_op_case.check(standin=True)
