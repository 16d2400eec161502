#!/usr/bin/env python3
"""Prints passed / failed / skipped per CTest label from a build's test list and a JUnit file, and
the GoogleTest tests of the GPU shards."""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: ci/summary.py BUILD_DIR JUNIT_XML", file=sys.stderr)
        return 2
    build, junit = sys.argv[1], sys.argv[2]
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    labels = {}
    for t in json.loads(listing).get("tests", []):
        names = []
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                names = p.get("value") or []
        labels[t["name"]] = names or ["(none)"]
    counts = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None or status == "fail":
            kind = "failed"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            kind = "skipped"
        else:
            kind = "passed"
        for label in labels.get(case.get("name"), ["(none)"]):
            counts.setdefault(label, {"passed": 0, "failed": 0, "skipped": 0})[kind] += 1
    total = {"passed": 0, "failed": 0, "skipped": 0}
    width = max([len(k) for k in counts] + [5])
    print(f"{'label':<{width}}  passed  failed  skipped")
    for label in sorted(counts):
        c = counts[label]
        print(f"{label:<{width}}  {c['passed']:>6}  {c['failed']:>6}  {c['skipped']:>7}")
    root = ET.parse(junit).getroot()
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.get("status") == "fail":
            total["failed"] += 1
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            total["skipped"] += 1
        else:
            total["passed"] += 1
    print(f"summary: {total['passed']} passed, {total['failed']} failed, "
          f"{total['skipped']} skipped (tests counted once; a test with two labels is in both rows)")
    shards(junit)
    return 0


def shards(junit: str) -> None:
    """GPU shards (<executable>/shard-<i>-of-<N>): their GoogleTest tests, from each shard's XML
    (the path its output names, else junit/<shard>.xml beside the JUnit file), failed ones named."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failed, missing, n = [], [], 0
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if not re.search(r"/shard-[0-9]+-of-[0-9]+$", name):
            continue
        n += 1
        m = re.search(r"GoogleTest XML: (\S+)", case.findtext("system-out") or "")
        places = ([m.group(1)] if m else []) + [os.path.join(os.path.dirname(junit), "junit", name + ".xml")]
        xml = next((p for p in places if os.path.isfile(p)), None)
        if xml is None:
            missing.append(name)
            continue
        exe = name.rsplit("/shard-", 1)[0]
        for t in ET.parse(xml).getroot().iter("testcase"):
            test = f"{exe}/{t.get('classname')}.{t.get('name')}"
            if t.find("failure") is not None:
                counts["failed"] += 1
                failed.append(test)
            elif t.find("skipped") is not None or t.get("result") in ("skipped", "suppressed"):
                counts["skipped"] += 1
            else:
                counts["passed"] += 1
    if n == 0:
        return
    print(f"GoogleTest tests in {n} GPU shards: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    for t in failed:
        print(f"  failed: {t}")
    for s in missing:
        print(f"  no GoogleTest XML (the shard did not finish): {s}")


if __name__ == "__main__":
    sys.exit(main())
