#!/usr/bin/env python3
"""The nightly report's verdict: the job x result table of this schedule, the exit code, and the
retry plan the auto-retry workflow follows (only infrastructure failures are retried).

usage: ci/nightly-verdict.py --registry nightly/suites.json --current DIR --plan FILE
environment: NEEDS (toJSON(needs) of the report job), SCHEDULE (nightly or weekly), SUITES (the
suites input: all, or names separated by commas), GITHUB_EVENT_NAME, GITHUB_RUN_ATTEMPT,
GITHUB_STEP_SUMMARY (appended when set).

A preset shipped to GPU jobs (`build.ship`) is built once by the job `build-<preset>`: its
failure after its setup is a failure (never retried), before it an infrastructure failure; the
jobs that need it are then skipped, and count as could-not-run, never as passed.

A GPU job's outputs say how far it got: `setup` (the container started, dependencies and SGLang
installed) and `ready` (built and qualified: the suites could start). A failed job counts as an
infrastructure failure (could-not-run: runner lost, pull or install failure) when its setup did
not finish, or when every suite it ran could not run (run-suite exit 3) or wrote nothing; a
failed gate or test (exit 1), a failed build or qualification, or a failed step after a passing
suite is a failure, and is never retried.

Exit codes: 0 every job of the schedule passed, 1 a job failed or was cancelled (or, on a
scheduled run, skipped), 2 bad usage, 3 could not run (no GPU job ran, or only infrastructure
failures).
"""
import argparse
import glob
import json
import os
import sys


def jobs_of(registry, schedule, selected):
    """job -> its suites, for the suites of this schedule that SELECTED (a set, or None: all)
    names; a job of no selected suite keeps an empty list."""
    jobs = {}
    for s in registry.get("suites", []):
        if s.get("schedule", "nightly") == schedule:
            names = jobs.setdefault(s.get("job", s["name"]), [])
            if selected is None or s["name"] in selected:
                names.append(s["name"])
    return jobs


def build_jobs_of(registry, schedule):
    """job -> the build job it needs (build-<preset>), for the shipped builds of this schedule."""
    needs = {}
    for s in registry.get("suites", []):
        build = s.get("build") or {}
        if s.get("schedule", "nightly") == schedule and build.get("ship"):
            needs[s.get("job", s["name"])] = "build-" + build["preset"]
    return needs


def suite_exits(current):
    """suite -> exit code of its latest attempt's suite.json under CURRENT."""
    best = {}
    for path in glob.glob(os.path.join(current, "**", "suite.json"), recursive=True):
        try:
            with open(path) as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        name, attempt = m.get("suite"), int(m.get("run_attempt") or 0)
        if name and (name not in best or attempt >= best[name][0]):
            best[name] = (attempt, int(m.get("exit_code", 3)))
    return {k: v[1] for k, v in best.items()}


def classify(job, result, outputs, suites, exits):
    """(kind, why) of a failed job: kind 'infrastructure' or 'failed'."""
    if job == "tools":
        return "failed", "the tools build failed"
    if job.startswith("build-"):
        if outputs.get("setup") != "true":
            return "infrastructure", "its setup did not finish (runner lost, pull or install failure)"
        return "failed", "the build of preset " + job[len("build-"):] + " failed"
    if job == "preflight":
        return "failed", ("the preflight failed: an unknown suite, a pin mismatch, or an SGLang "
                          "ref or image that does not resolve")
    if outputs.get("setup") != "true":
        return "infrastructure", "its setup did not finish (runner lost, pull or install failure)"
    if outputs.get("ready") != "true":
        return "failed", "its build or qualification failed"
    codes = {s: exits.get(s) for s in suites}
    gate = [s for s, c in codes.items() if c == 1]
    if gate:
        return "failed", "a gate or test failed: " + ", ".join(gate)
    if all(c == 0 for c in codes.values()):
        return "failed", "a step after its passing suites failed"
    cnr = [s for s, c in codes.items() if c != 0]
    return "infrastructure", "could not run: " + ", ".join(cnr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--registry", required=True)
    ap.add_argument("--current", required=True, help="this run's suite artifacts")
    ap.add_argument("--plan", required=True, help="where the retry plan (JSON) is written")
    a = ap.parse_args()
    schedule = os.environ.get("SCHEDULE", "nightly")
    try:
        needs = json.loads(os.environ["NEEDS"])
        with open(a.registry) as f:
            registry = json.load(f)
    except (KeyError, ValueError, OSError) as e:
        print(f"nightly-verdict: NEEDS or {a.registry} cannot be read: {e}", file=sys.stderr)
        return 2
    wanted = os.environ.get("SUITES", "all")
    jobs = jobs_of(registry, schedule, None if wanted == "all" else set(wanted.split(",")))
    exits = suite_exits(a.current)
    build_of = build_jobs_of(registry, schedule)
    builds = sorted(set(build_of.values()))
    event = os.environ.get("GITHUB_EVENT_NAME", "")
    attempt = int(os.environ.get("GITHUB_RUN_ATTEMPT") or 1)
    rows, failed, infra, problems = [], {}, {}, []
    for job in ["preflight", "tools"] + builds + sorted(jobs):
        n = needs.get(job)
        if n is None and (job == "preflight" or job in builds):
            continue
        if n is None:
            problems.append(f"{job}=not-in-needs")
            rows.append((job, "not in needs", ""))
            continue
        result, why = n.get("result", "unknown"), ""
        if result == "failure":
            kind, why = classify(job, result, n.get("outputs") or {}, jobs.get(job, []), exits)
            (infra if kind == "infrastructure" else failed)[job] = why
        elif result == "cancelled":
            failed[job] = why = "cancelled"
        elif (result == "skipped" and job in build_of
              and (needs.get(build_of[job]) or {}).get("result") in ("failure", "cancelled")):
            # Skipped because the build it runs did not come: could not run, never a pass.
            infra[job] = why = f"could not run: the build it needs ({build_of[job]}) " \
                               f"{needs[build_of[job]]['result'].replace('failure', 'failed')}"
        elif result == "skipped" and event == "schedule" and job in jobs:
            # A scheduled run skips nothing: a skipped suite there is a dormant one.
            failed[job] = why = "skipped on a scheduled run"
        rows.append((job, result, why))
    ran = [j for j in jobs if (needs.get(j) or {}).get("result") in ("success", "failure")]
    summary = [f"## {schedule} jobs (attempt {attempt})\n"]
    if attempt > 1:
        earlier = os.path.join(a.current, f"dsv4-verdict-attempt{attempt - 1}", "verdict.json")
        try:
            with open(earlier) as f:
                prev = json.load(f)
        except (OSError, ValueError):
            prev = {}
        if prev.get("retry"):
            summary.append(f"**A retry**: attempt {attempt} re-runs the infrastructure failures of "
                           f"attempt {attempt - 1} ({', '.join(sorted(prev['infrastructure']))}); "
                           "it is not retried again.\n")
        else:
            summary.append(f"This is attempt {attempt} of the run: a re-run of failed jobs.\n")
    summary.append("| job | result | why |\n| --- | --- | --- |")
    summary += [f"| {j} | {r} | {w} |" for j, r, w in rows]
    broken = sorted(j for j in failed if j in builds)
    if broken and not ran:
        verdict, code = "failed: " + " ".join(broken) + " (no GPU job could run without it)", 1
    elif not ran:
        verdict, code = "could not run: no GPU job of this schedule ran", 3
    elif failed or problems:
        verdict, code = "failed: " + " ".join(sorted(failed) + problems), 1
    elif infra:
        verdict, code = "could not run (infrastructure): " + " ".join(sorted(infra)), 3
    else:
        verdict, code = "every job of this schedule ran and passed", 0
    retry = bool(infra) and not failed and not problems and bool(ran)
    plan = {"attempt": attempt, "retry": retry, "infrastructure": infra, "failed": failed,
            "verdict": verdict}
    if infra and not retry:
        plan["why_not"] = ("a gate, test or build failed too: a re-run of the failed jobs would "
                           "run those again")
    with open(a.plan, "w") as f:
        json.dump(plan, f, indent=2)
    summary.append(f"\n**{verdict}**\n")
    text = "\n".join(summary) + "\n"
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(text)
    print(text)
    if code:
        print(f"::error::{verdict}")
    return code


if __name__ == "__main__":
    sys.exit(main())
