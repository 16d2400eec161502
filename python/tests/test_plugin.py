"""The pytest plugin seen from a user's test file: marker, op registry, verdicts, exit codes."""

import json
import os
import textwrap

import pytest

GOOD = """
import pytest

@pytest.mark.dsv4("smoke", shape="n=33")
def test_affine(dsv4_case):
    dsv4_case.run(lambda live: {"out": live.inp["x"] * live.inp["scale"] + live.inp["bias"]})
"""


def run(pytester, src, *args, subprocess=False):
    pytester.makepyfile(test_user=textwrap.dedent(src))
    go = pytester.runpytest_subprocess if subprocess else pytester.runpytest
    return go("-p", "dsv4ci.plugin", "-p", "no:cacheprovider", *args)


def test_a_correct_op_passes(pytester, tool):
    r = run(pytester, GOOD, "--dsv4-report", str(pytester.path / "rep"))
    r.assert_outcomes(passed=1)
    assert r.ret == 0
    rows = [json.loads(l) for l in (pytester.path / "rep.jsonl").read_text().splitlines()]
    assert [x["verdict"] for x in rows] == ["match"] and rows[0]["family"] == "smoke"
    assert "| match |" in (pytester.path / "rep.md").read_text()


def test_a_wrong_op_fails_with_the_replay_line(pytester, tool):
    r = run(pytester, GOOD.replace("+ live.inp[\"bias\"]", "- live.inp[\"bias\"]"),
            "--dsv4-keep-dir", str(pytester.path / "kept"))
    r.assert_outcomes(failed=1)
    assert r.ret == 1
    out = r.stdout.str()
    assert "MISMATCH" in out and "reproduce: " in out and "dsv4-replay" in out
    assert list((pytester.path / "kept").glob("*.safetensors"))


def test_a_test_that_never_runs_the_op_is_an_error(pytester, tool):
    r = run(pytester, """
        import pytest

        @pytest.mark.dsv4("smoke", shape="n=5")
        def test_nothing(dsv4_case):
            pass
        """)
    r.assert_outcomes(passed=1, errors=1)
    assert "never called dsv4_case.run" in r.stdout.str()
    assert r.ret == 1


def test_every_test_skipped_is_could_not_run(pytester, tool):
    r = run(pytester, """
        import pytest

        @pytest.mark.dsv4("smoke", shape="n=5")
        def test_skips(dsv4_case):
            pytest.skip("op not importable here")
        """)
    r.assert_outcomes(skipped=1)
    assert r.ret == 3
    assert "could not run: every one of 1 dsv4 tests skipped (1 x op not importable here)" in r.stdout.str()


def test_a_missing_tool_is_could_not_run(pytester):
    r = run(pytester, GOOD, "--dsv4-replay", "/nonexistent/dsv4-replay")
    assert r.ret == 3, r.stdout.str()
    assert "is not an executable file" in r.stdout.str()


def test_an_unknown_family_cannot_draw(pytester, tool):
    r = run(pytester, GOOD.replace('"smoke"', '"nosuch"'))
    assert r.ret == 3
    assert "nosuch" in r.stdout.str()


def test_require_with_nothing_collected_is_could_not_run(pytester, tool):
    r = run(pytester, "def test_plain():\n    pass\n", "--dsv4-require", "--dsv4-op", "none")
    assert r.ret == 3


def subprocess_env(monkeypatch, tool):
    """A pytest subprocess finds this package and the project's dsv4-replay."""
    import dsv4ci

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(dsv4ci.__file__)))
    monkeypatch.setenv("PYTHONPATH", package_root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("DSV4_REPLAY", tool)


def test_registered_ops_run_through_dsv4_op_case_with_their_standins(pytester, tool, monkeypatch):
    subprocess_env(monkeypatch, tool)
    pytester.makepyfile(myops=textwrap.dedent("""
        from dsv4ci.ops import Op, register

        def affine(x, scale, bias):
            return x * scale + bias

        def wrong(x, scale, bias):
            return x * scale

        register(Op(family="smoke", name="demo.affine", module="no_such_module_anywhere",
                    attr="affine", sweeps=("gpu",), standin="myops:affine", max_cases=2,
                    call=lambda fn, live: {"out": fn(live.inp["x"], live.inp["scale"], live.inp["bias"])}))
        register(Op(family="smoke", name="demo.wrong", module="myops", attr="wrong", sweeps=("gpu",),
                    max_cases=1, notes="drops the bias",
                    call=lambda fn, live: {"out": fn(live.inp["x"], live.inp["scale"], live.inp["bias"])}))
        """))
    src = """
        import myops

        def test_op(dsv4_op_case):
            dsv4_op_case.check()
        """
    r = run(pytester, src, "--dsv4-family", "smoke", "--dsv4-standin", "--dsv4-device", "cpu", subprocess=True)
    out = r.stdout.str()
    # the stand-in of demo.affine matches; demo.wrong has no stand-in and skips
    r.assert_outcomes(passed=2, skipped=1)
    r = run(pytester, src, "--dsv4-family", "smoke", "--dsv4-device", "cpu", "-rs", subprocess=True)
    out = r.stdout.str()
    # SGLang's function: demo.affine is not importable (skipped with the reason); demo.wrong fails
    r.assert_outcomes(failed=1, skipped=1)  # nothing is drawn for an op that cannot be imported
    assert "no_such_module_anywhere is not importable here" in out
    assert "note on demo.wrong: drops the bias" in out


def test_an_op_that_cannot_be_captured_skips_its_graph_runs_with_the_reason(pytester, tool, monkeypatch):
    subprocess_env(monkeypatch, tool)
    pytester.makepyfile(hostops=textwrap.dedent("""
        from dsv4ci.ops import Op, register

        def affine(x, scale, bias):
            return x * scale + bias

        register(Op(family="smoke", name="demo.host_read", module="hostops", attr="affine",
                    sweeps=("gpu",), max_cases=1, not_capturable="it calls .item() on the device",
                    call=lambda fn, live: {"out": fn(live.inp["x"], live.inp["scale"], live.inp["bias"])}))
        """))
    src = """
        import hostops

        def test_op(dsv4_op_case):
            dsv4_op_case.check()
        """
    r = run(pytester, src, "--dsv4-family", "smoke", "--dsv4-device", "cpu", "--dsv4-graph", "-rs",
            subprocess=True)
    out = r.stdout.str()
    r.assert_outcomes(passed=1, skipped=1)  # eager runs; the graph run is not SGLang's to make
    assert "demo.host_read is not capturable into a graph: it calls .item() on the device" in out


def sglang_checkout(root, name):
    """A folder laid out as SGLang's repository whose `sglang.which` names `name`."""
    pkg = root / name / "python" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "which.py").write_text(f"NAME = {name!r}\n")
    return root / name


IMPORTS_SGLANG = """
    import sglang.which

    def test_which(request):
        assert sglang.which.NAME == request.config.getoption("--dsv4-op")[0]
    """


def test_sglang_src_comes_from_the_environment_when_the_option_is_absent(pytester, tool, monkeypatch):
    subprocess_env(monkeypatch, tool)
    monkeypatch.setenv("DSV4_SGLANG_SRC", str(sglang_checkout(pytester.path, "from_env")))
    # --dsv4-op carries the expected tree's name into the test
    r = run(pytester, IMPORTS_SGLANG, "--dsv4-op", "from_env", subprocess=True)
    r.assert_outcomes(passed=1)
    # the option wins over the variable
    opt = sglang_checkout(pytester.path, "from_option")
    r = run(pytester, IMPORTS_SGLANG, "--dsv4-op", "from_option", "--dsv4-sglang-src", str(opt), subprocess=True)
    r.assert_outcomes(passed=1)
    # a variable naming no SGLang checkout is an error naming the folder, not a silent fallback
    monkeypatch.setenv("DSV4_SGLANG_SRC", str(pytester.path / "nowhere"))
    r = run(pytester, IMPORTS_SGLANG, "--dsv4-op", "from_env", subprocess=True)
    assert r.ret != 0
    assert "DSV4_SGLANG_SRC: " in r.stderr.str() and "nowhere: no python/sglang folder" in r.stderr.str()


def test_a_session_leaves_no_drawn_cases_or_sglang_tree_behind(pytester, tool, monkeypatch):
    subprocess_env(monkeypatch, tool)
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("DSV4_SGLANG_SRC", str(sglang_checkout(pytester.path, "cleaned")))
    r = run(pytester, GOOD, subprocess=True)
    r.assert_outcomes(passed=1)
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("dsv4-")) == []
