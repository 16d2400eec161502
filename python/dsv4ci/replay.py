"""The dsv4-replay tool from Python: find it, draw cases with it, judge case files with it."""

import glob
import json
import os
import shlex
import shutil
import subprocess

EXIT_MATCH, EXIT_MISMATCH, EXIT_BAD_CASE, EXIT_CANNOT_RUN = 0, 1, 2, 3


class ToolError(RuntimeError):
    """dsv4-replay is missing or failed in a way that is not a verdict: the run cannot happen."""


def _repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_tool(explicit=None):
    """The dsv4-replay executable: `explicit`, $DSV4_REPLAY, a build of this checkout, or PATH."""
    for cand in (explicit, os.environ.get("DSV4_REPLAY")):
        if cand:
            if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
                raise ToolError(f"dsv4-replay {cand!r} (from {'--dsv4-replay' if cand == explicit else '$DSV4_REPLAY'}) "
                                "is not an executable file")
            return cand
    builds = sorted(glob.glob(os.path.join(_repo_root(), "build", "*", "replay", "dsv4-replay")),
                    key=os.path.getmtime, reverse=True)
    if builds:
        return builds[0]
    found = shutil.which("dsv4-replay")
    if found:
        return found
    raise ToolError("dsv4-replay not found: set $DSV4_REPLAY or --dsv4-replay, or build a preset "
                    "(cmake --preset cpu && cmake --build --preset cpu --target dsv4-replay)")


def _spec(items):
    return ",".join(k if v == "" else f"{k}={v}" for k, v in items.items())


def draw_command(tool, family, out_dir, shape=None, sweep=None, seed=None, overrides=None, max_points=0):
    """The argv of `dsv4-replay --draw` for these choices."""
    if shape is not None and sweep is not None:
        raise ValueError("draw: give shape or sweep, not both")
    argv = [tool, "--draw", family, "--out", str(out_dir)]
    if isinstance(shape, dict):
        shape = _spec(shape)
    merged = dict(overrides or {})
    if shape is not None:
        if merged:
            shape = ",".join(p for p in (shape, _spec(merged)) if p)
            merged = {}
        argv += ["--shape", shape]
    if sweep is not None:
        argv += ["--sweep", sweep]
    if merged:
        argv += ["--set", _spec(merged)]
    if seed is not None:
        argv += ["--seed", str(int(seed))]
    if max_points:
        argv += ["--max-points", str(int(max_points))]
    return argv


def draw(tool, family, out_dir, shape=None, sweep=None, seed=None, overrides=None, max_points=0):
    """Draws cases into out_dir (at most max_points of a sweep, evenly spaced; 0: all); returns the
    written paths in the tool's order."""
    os.makedirs(out_dir, exist_ok=True)
    argv = draw_command(tool, family, out_dir, shape, sweep, seed, overrides, max_points)
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise ToolError(f"{shlex.join(argv)} exited {p.returncode}: {(p.stderr or p.stdout).strip()}")
    paths = [line.strip() for line in p.stdout.splitlines() if line.strip()]
    if not paths:
        raise ToolError(f"{shlex.join(argv)} wrote no case")
    return paths


class Verdict:
    """dsv4-replay --json's answer for one case file."""

    def __init__(self, report, exit_code, argv):
        self.report = report
        self.exit_code = exit_code
        self.argv = argv

    @property
    def verdict(self):
        return self.report.get("verdict", "?")

    @property
    def ok(self):
        return self.exit_code == EXIT_MATCH and self.verdict == "match"

    def command(self):
        """The command that reproduces this verdict, without --json."""
        return shlex.join([a for a in self.argv if a != "--json"])

    def summary(self):
        lines = [f"dsv4-replay verdict: {self.verdict} (exit {self.exit_code}, rule "
                 f"{self.report.get('rule', '?')}, family {self.report.get('family', '?')}, case "
                 f"{self.report.get('case', '?')})"]
        if self.report.get("error"):
            lines.append(f"  error: {self.report['error']}")
        for o in self.report.get("outputs", []):
            if o.get("ok"):
                continue
            lines.append(f"  output {o.get('name')}: {o.get('mismatched')} of {o.get('checked')} "
                         f"mismatched ({o.get('comparator')})")
            for m in o.get("first", [])[:8]:
                lines.append(f"    at {m.get('index')}: got {m.get('got')} want {m.get('want')}")
            if o.get("message"):
                lines.append("    " + o["message"].strip().replace("\n", "\n    "))
        return "\n".join(lines)


def judge(tool, path, mode="reference", rule=None, extra=()):
    """Runs `dsv4-replay PATH --json` (mode reference|device, rule None|strict|tolerant)."""
    argv = [tool, str(path), "--" + mode, "--json"]
    if rule:
        argv.append("--" + rule)
    argv += list(extra)
    p = subprocess.run(argv, capture_output=True, text=True)
    try:
        report = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise ToolError(f"{shlex.join(argv)} exited {p.returncode} without a JSON verdict: "
                        f"{(p.stderr or p.stdout).strip()[:2000]}") from None
    if not isinstance(report, dict):
        raise ToolError(f"{shlex.join(argv)}: the JSON verdict is not an object")
    return Verdict(report, p.returncode, argv)
