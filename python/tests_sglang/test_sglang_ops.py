"""Each registered SGLang op on each drawn case of its sweeps, judged by the project's reference.

An op whose module is not importable here, or that SGLang would not dispatch to on this platform,
skips with the reason; a run in which every op skipped ends as could-not-run (exit 3).

    PYTHONPATH=python python3 -m pytest python/tests_sglang --dsv4-report out/sglang-kernels
"""


def test_sglang_op(dsv4_op_case):
    dsv4_op_case.check(standin=False)
