"""pytest plugin: drawn cases as torch tensors on the device, the op run on them, the reference judging.

Two ways in:
  * `dsv4_op_case`: a test taking this fixture runs once per registered op (dsv4ci.ops) and drawn
    case of the op's sweeps; `dsv4_op_case.check()` imports SGLang's function (the test skips with
    the reason where it is not importable, or SGLang would not dispatch to it here), runs it through
    the op's mapping and judges it.
  * `@pytest.mark.dsv4(family, sweep=..., shape=..., set={...}, graph=False, repeat=1)` on a test
    taking `dsv4_case` (a LiveCase): the test calls `dsv4_case.run(fn)` with its own implementation.

A run in which every dsv4 test skipped, or the tool could not run, ends with exit status 3 (could not
run), never green; a mismatch fails its test (exit 1) and keeps the case file with got.*.
"""

import json
import os
import shutil
import tempfile

import pytest
import torch

from . import ops as ops_mod
from . import replay, sglang_tree
from .case import Case
from .live import CaseProbe, LiveCase, RunFailure

EXIT_COULD_NOT_RUN = 3


def pytest_addoption(parser):
    g = parser.getgroup("dsv4", "dsv4-ci kernel cases")
    g.addoption("--dsv4-replay", default=None, help="the dsv4-replay executable (default: $DSV4_REPLAY, "
                "a build of this checkout, PATH)")
    g.addoption("--dsv4-device", default=None, help="torch device (default: cuda when available, else cpu)")
    g.addoption("--dsv4-family", action="append", default=[], help="only these families (repeatable)")
    g.addoption("--dsv4-op", action="append", default=[], help="only these ops (repeatable)")
    g.addoption("--dsv4-sweep", default=None, help="draw this sweep instead of each op's own")
    g.addoption("--dsv4-seed", type=int, default=None, help="draw with this seed (default: the tool's)")
    g.addoption("--dsv4-max-cases", type=int, default=0,
                help="at most this many cases per op and sweep, evenly spaced over the sweep (0: all)")
    g.addoption("--dsv4-graph", action="store_true", help="also run each case captured in a CUDA graph")
    g.addoption("--dsv4-repeat", type=int, default=1, help="run each case this many times; bytes must agree")
    g.addoption("--dsv4-standin", action="store_true",
                help="run each op's stand-in (the project's re-implementation) instead of SGLang's function")
    g.addoption("--dsv4-any-platform", action="store_true",
                help="run every op on this device, also those SGLang dispatches to on the other platform "
                     "(a Triton kernel SGLang uses on ROCm, run on CUDA)")
    g.addoption("--dsv4-sglang-src", default=None,
                help="a folder of SGLang source files (python/sglang/...) to import SGLang from "
                     "(default: $DSV4_SGLANG_SRC, else the installed SGLang)")
    g.addoption("--dsv4-keep-dir", default=os.environ.get("DSV4_CASE_DIR") or "dsv4-cases",
                help="where case files with got.* are written (default: $DSV4_CASE_DIR, else ./dsv4-cases)")
    g.addoption("--dsv4-keep-all", action="store_true", help="keep matching case files too")
    g.addoption("--dsv4-report", default=None,
                help="write PATH.jsonl (a row per case, as it finishes) and PATH.md (op x case x verdict)")
    g.addoption("--dsv4-require", action="store_true",
                help="no dsv4 test collected is could-not-run too (for the nightly)")


class _State:
    def __init__(self, config):
        self.config = config
        self.draw_dir = tempfile.mkdtemp(prefix="dsv4-draw-")  # removed when the session ends
        self.sglang_dir = None  # the SGLang tree built for the session, removed with it
        self.drawn = {}
        self.tool_error = None
        self.collected = 0
        self.outcomes = {"passed": 0, "failed": 0, "skipped": 0, "could-not-run": 0}
        self.skip_reasons = {}
        self.rows = []
        self.report = config.getoption("--dsv4-report")
        if self.report:
            os.makedirs(os.path.dirname(os.path.abspath(self.report)), exist_ok=True)
            open(self.report + ".jsonl", "w").close()

    def tool(self):
        return replay.find_tool(self.config.getoption("--dsv4-replay"))

    def device(self):
        d = self.config.getoption("--dsv4-device")
        return torch.device(d if d else ("cuda" if torch.cuda.is_available() else "cpu"))

    def draw(self, family, sweep=None, shape=None, overrides=None, seed=None, max_points=0):
        key = (family, sweep, json.dumps(shape, sort_keys=True) if isinstance(shape, dict) else shape,
               json.dumps(overrides or {}, sort_keys=True), seed, max_points)
        if key not in self.drawn:
            out = os.path.join(self.draw_dir, str(len(self.drawn)))
            self.drawn[key] = replay.draw(self.tool(), family, out, shape=shape, sweep=sweep, seed=seed,
                                          overrides=overrides, max_points=max_points if sweep else 0)
        return self.drawn[key]

    def record(self, row):
        self.rows.append(row)
        if self.report:
            with open(self.report + ".jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()


def _state(config):
    return config._dsv4_state


def pytest_configure(config):
    config.addinivalue_line("markers", "dsv4_standin: dsv4_op_case runs each op's stand-in (no SGLang needed)")
    config.addinivalue_line("markers", "dsv4(family, sweep=None, shape=None, set=None, seed=None, graph=False, "
                            "repeat=1, source='sglang', rule=None): run the test on drawn cases of a family")
    config._dsv4_state = _State(config)
    src = config.getoption("--dsv4-sglang-src")
    where = "--dsv4-sglang-src"
    if not src and os.environ.get("DSV4_SGLANG_SRC"):
        src, where = os.environ["DSV4_SGLANG_SRC"], "DSV4_SGLANG_SRC"
    if src:
        try:
            config._dsv4_state.sglang_dir = sglang_tree.build(src)
        except FileNotFoundError as e:
            raise pytest.UsageError(f"{where}: {e}") from None


def pytest_unconfigure(config):
    """The drawn cases and the SGLang tree are the session's own: a kept case lives in
    --dsv4-keep-dir, so nothing under the temporary folders outlives the run."""
    state = getattr(config, "_dsv4_state", None)
    if state is None:
        return
    for d in (state.draw_dir, state.sglang_dir):
        if d:
            shutil.rmtree(d, ignore_errors=True)


class _Param:
    """One parametrisation: an op (or a marker's test) and a drawn case file, or why none exists
    (`error`: could not run; `skip`: the op cannot run here, so nothing was drawn for it)."""

    def __init__(self, path=None, op=None, graph=False, error=None, id="", skip=None):
        self.path, self.op, self.graph, self.error, self.id, self.skip = path, op, graph, error, id, skip


def _case_id(path):
    base = os.path.basename(path)
    return base[: -len(".safetensors")] if base.endswith(".safetensors") else base


def _unavailable(state, op, config):
    """Why SGLang's function of `op` cannot run here (not importable, not dispatched to), or None."""
    if op.native_only or not config.getoption("--dsv4-any-platform"):
        why = op.platform_reason(state.device())
        if why:
            return why
    try:
        op.function(standin=False)
    except ops_mod.Unavailable as e:
        return str(e)
    return None


def _params_for_op(state, op, config, standin):
    if not standin:
        why = _unavailable(state, op, config)
        if why:  # nothing to draw for an op that cannot run: one skipped test names why
            return [_Param(op=op, id=f"{op.name}-unavailable", skip=why)]
    sweeps = [config.getoption("--dsv4-sweep")] if config.getoption("--dsv4-sweep") else list(op.sweeps)
    limit = config.getoption("--dsv4-max-cases") or op.max_cases
    out = []
    for sw in sweeps:
        try:
            paths = state.draw(op.family, sweep=sw, overrides=op.shape, seed=config.getoption("--dsv4-seed"),
                               max_points=limit)
        except (replay.ToolError, ValueError) as e:
            out.append(_Param(op=op, error=str(e), id=f"{op.name}-{sw}-cannot-draw"))
            continue
        for p in paths:
            out.append(_Param(p, op, False, id=f"{op.name}-{_case_id(p)}"))
            if config.getoption("--dsv4-graph"):
                out.append(_Param(p, op, True, id=f"{op.name}-{_case_id(p)}-graph"))
    return out


def pytest_generate_tests(metafunc):
    config = metafunc.config
    state = _state(config)
    if "dsv4_op_case" in metafunc.fixturenames:
        ops = ops_mod.all_ops(config.getoption("--dsv4-family") or None, config.getoption("--dsv4-op") or None)
        standin = bool(config.getoption("--dsv4-standin") or metafunc.definition.get_closest_marker("dsv4_standin"))
        params = []
        for op in ops:
            params += _params_for_op(state, op, config, standin)
        if not params:
            params = [_Param(error="no op registered matches --dsv4-family / --dsv4-op", id="no-op")]
        metafunc.parametrize("dsv4_op_case", params, ids=[p.id for p in params], indirect=True)
    marker = metafunc.definition.get_closest_marker("dsv4")
    if marker is not None and "dsv4_case" in metafunc.fixturenames:
        kw = dict(marker.kwargs)
        family = marker.args[0] if marker.args else kw.pop("family", None)
        params = []
        try:
            if not family:
                raise ValueError("@pytest.mark.dsv4 needs a family")
            paths = state.draw(family, sweep=kw.get("sweep"), shape=kw.get("shape"), overrides=kw.get("set"),
                               seed=kw.get("seed", config.getoption("--dsv4-seed")))
            graph = kw.get("graph", False) or config.getoption("--dsv4-graph")
            for p in paths:
                params.append(_Param(p, None, False, id=_case_id(p)))
                if graph:
                    params.append(_Param(p, None, True, id=_case_id(p) + "-graph"))
        except (replay.ToolError, ValueError) as e:
            params = [_Param(error=str(e), id="cannot-draw")]
        metafunc.parametrize("dsv4_case", params, ids=[p.id for p in params], indirect=True)


def _rounds(state, case, applies=None, source="sglang", tries=8):
    """The same shape at the next seed the op applies to (of the `tries` after the case's): a graph
    replay's second input set. None when the op applies to none of them."""
    spec, seed = case.metadata.get("dsv4.shape"), case.seed
    if spec is None or seed is None:
        return []
    for k in range(1, tries + 1):
        rounds = [Case.load(p) for p in state.draw(case.family, shape=spec, seed=seed + k)]
        if not applies or not any(applies(CaseProbe(r, source)) for r in rounds):
            return rounds
    return None


class OpCase:
    """The `dsv4_op_case` fixture's value: an op and a drawn case; `check()` runs and judges it."""

    def __init__(self, state, param, request):
        self.state, self.param, self.request = state, param, request
        self.op = param.op
        self.case = Case.load(param.path)
        self.live = None

    def check(self, standin=None):
        config = self.state.config
        standin = config.getoption("--dsv4-standin") if standin is None else standin
        device = torch.device("cpu") if standin and not config.getoption("--dsv4-device") else self.state.device()
        if not standin and (self.op.native_only or not config.getoption("--dsv4-any-platform")):
            why = self.op.platform_reason(device)
            if why:
                pytest.skip(why)
        try:
            fn = self.op.function(standin=standin)
        except ops_mod.Unavailable as e:
            pytest.skip(str(e))
        source = "dsv4-standin" if standin else "sglang"
        if self.param.graph and self.op.not_capturable:
            pytest.skip(f"{self.op.name} is not capturable into a graph: {self.op.not_capturable}")
        if self.op.applies:  # asked on the CPU inputs, before any device buffer is made
            why = self.op.applies(CaseProbe(self.case, source))
            if why:
                pytest.skip(f"{self.op.name} does not apply to {self.case.name}: {why}")
        rounds = _rounds(self.state, self.case, self.op.applies, source) if self.param.graph else []
        if rounds is None:
            pytest.skip(f"{self.op.name} applies to no case of {self.case.name} at the 8 seeds after "
                        f"{self.case.seed}: no second input set to replay the graph on")
        self.live = LiveCase(self.case, device, self.state.tool(), config.getoption("--dsv4-keep-dir"),
                             label=self.op.name + (".standin" if standin else ""), source=source,
                             rounds=rounds, keep_all=config.getoption("--dsv4-keep-all"))
        try:
            return self.live.run(lambda live: self.op.call(fn, live), graph=self.param.graph,
                                 repeat=config.getoption("--dsv4-repeat"))
        except replay.ToolError as e:
            self.state.tool_error = str(e)
            self.request.node._dsv4_cannot = True
            pytest.fail(f"could not run: {e}", pytrace=False)
        except RunFailure as e:
            if self.op.notes:
                raise RunFailure(f"{e}\n  note on {self.op.name}: {self.op.notes}") from None
            raise


def _fail_param(state, param, node):
    if param.error:
        state.tool_error = param.error
        node._dsv4_cannot = True
        pytest.fail(f"could not run: {param.error}", pytrace=False)


@pytest.fixture
def dsv4_op_case(request):
    state = _state(request.config)
    p = request.param
    request.node._dsv4 = {"op": p.op.name if p.op else "", "family": p.op.family if p.op else "",
                          "backend": p.op.backend if p.op else "", "case": _case_id(p.path) if p.path else p.id,
                          "graph": p.graph}
    _fail_param(state, p, request.node)
    if p.skip:
        pytest.skip(p.skip)
    oc = OpCase(state, request.param, request)
    yield oc
    if oc.live is not None and oc.live.verdicts:
        request.node._dsv4["files"] = [p for _, _, p in oc.live.verdicts if os.path.exists(p)]


@pytest.fixture
def dsv4_case(request):
    state = _state(request.config)
    request.node._dsv4 = {"op": request.node.originalname, "family": "", "backend": "",
                          "case": request.param.id, "graph": request.param.graph}
    _fail_param(state, request.param, request.node)
    marker = request.node.get_closest_marker("dsv4")
    kw = dict(marker.kwargs) if marker else {}
    case = Case.load(request.param.path)
    live = LiveCase(case, state.device(), state.tool(), request.config.getoption("--dsv4-keep-dir"),
                    label=request.node.name, source=kw.get("source", "sglang"), rule=kw.get("rule"),
                    rounds=_rounds(state, case) if request.param.graph else [],
                    keep_all=request.config.getoption("--dsv4-keep-all"))
    request.node._dsv4 = {"op": request.node.originalname, "family": case.family, "backend": "",
                          "case": _case_id(request.param.path), "graph": request.param.graph}
    graph, repeat = request.param.graph, kw.get("repeat", request.config.getoption("--dsv4-repeat"))
    base_run = live.run
    live.run = lambda fn, graph=graph, repeat=repeat: base_run(fn, graph=graph, repeat=repeat)
    yield live
    if live.runs == 0 and getattr(request.node, "_dsv4_call_outcome", None) == "passed":
        pytest.fail(f"{request.node.name}: the test never called dsv4_case.run(fn): nothing was judged",
                    pytrace=False)


@pytest.fixture
def dsv4_draw(request):
    """dsv4_draw(family, shape=None, sweep=None, seed=None, overrides=None) -> [Case]: drawn cases."""
    state = _state(request.config)

    def draw(family, shape=None, sweep=None, seed=None, overrides=None):
        return [Case.load(p) for p in state.draw(family, sweep=sweep, shape=shape, overrides=overrides,
                                                 seed=seed)]

    return draw


@pytest.fixture
def dsv4_live(request, tmp_path):
    """dsv4_live(case, label="", device=None, source="sglang") -> LiveCase (cases kept under tmp_path)."""
    state = _state(request.config)

    def live(case, label="", device=None, source="sglang", rule=None):
        return LiveCase(case, device or state.device(), state.tool(), str(tmp_path / "cases"),
                        label=label or request.node.name, source=source, rule=rule)

    return live


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item._dsv4_call_outcome = rep.outcome
    info = getattr(item, "_dsv4", None)
    if info is None:
        return
    if rep.when == "call" or (rep.when == "setup" and not rep.passed) or (rep.when == "teardown" and rep.failed):
        verdict = "match" if rep.passed else ("skipped" if rep.skipped else "MISMATCH")
        if rep.failed and getattr(item, "_dsv4_cannot", False):
            verdict = "could-not-run"
        reason = ""
        if rep.skipped and isinstance(rep.longrepr, tuple):
            reason = rep.longrepr[2]
            reason = reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason
        elif rep.failed:
            reason = str(rep.longreprtext).strip().splitlines()[-1][:300] if rep.longreprtext else ""
        prev = getattr(item, "_dsv4_row", None)
        if prev is None or prev["verdict"] in ("match", "skipped"):
            item._dsv4_row = dict(info, test=item.nodeid, verdict=verdict, reason=reason)


def pytest_collection_modifyitems(session, config, items):
    _state(config).collected = sum(1 for i in items if "dsv4_op_case" in getattr(i, "fixturenames", ())
                                   or "dsv4_case" in getattr(i, "fixturenames", ()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # the row is complete once teardown has reported
    yield
    row = getattr(item, "_dsv4_row", None)
    if row is None:
        return
    state = _state(item.config)
    info = getattr(item, "_dsv4", {})
    row["files"] = info.get("files", [])
    state.record(row)
    key = {"match": "passed", "skipped": "skipped", "could-not-run": "could-not-run"}.get(row["verdict"], "failed")
    state.outcomes[key] += 1
    if key == "skipped":
        state.skip_reasons[row["reason"]] = state.skip_reasons.get(row["reason"], 0) + 1


def _markdown(rows):
    lines = ["| op | backend | case | verdict | case file / reason |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        detail = ", ".join(r.get("files") or []) or r.get("reason", "")
        lines.append(f"| {r['op']} | {r.get('backend', '')} | {r['case']}{' (graph)' if r.get('graph') else ''} "
                     f"| {r['verdict']} | {detail.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def pytest_sessionfinish(session, exitstatus):
    state = getattr(session.config, "_dsv4_state", None)
    if state is None:
        return
    if state.report:
        with open(state.report + ".md", "w") as f:
            counts = ", ".join(f"{v} {k}" for k, v in state.outcomes.items())
            f.write(f"# dsv4 cases: {counts}\n\n")
            f.write(_markdown(state.rows))
    o = state.outcomes
    cannot = None
    if o["failed"]:
        cannot = None  # a mismatch or a failed check is the verdict (exit 1)
    elif o["could-not-run"] or state.tool_error:
        cannot = f"could not run: {state.tool_error or 'a case could not be drawn or judged'}"
    elif state.collected and o["passed"] == 0:
        reasons = "; ".join(f"{n} x {r}" for r, n in sorted(state.skip_reasons.items(), key=lambda x: -x[1]))
        cannot = f"could not run: every one of {state.collected} dsv4 tests skipped ({reasons})"
    elif not state.collected and session.config.getoption("--dsv4-require"):
        cannot = "could not run: --dsv4-require and no dsv4 test was collected"
    if cannot:
        session.config._dsv4_cannot = cannot
        session.exitstatus = EXIT_COULD_NOT_RUN


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = getattr(config, "_dsv4_state", None)
    if state is None or not (state.collected or state.rows):
        return
    o = state.outcomes
    terminalreporter.write_line(f"dsv4: {o['passed']} match, {o['failed']} mismatch or failed, {o['skipped']} skipped, "
                                f"{o['could-not-run']} could not run"
                                + (f"; report {state.report}.md" if state.report else ""))
    msg = getattr(config, "_dsv4_cannot", None)
    if msg:
        terminalreporter.write_line(f"dsv4: {msg} (exit {EXIT_COULD_NOT_RUN})", red=True)
