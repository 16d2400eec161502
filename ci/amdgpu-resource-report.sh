#!/usr/bin/env bash
# Prints a per-kernel resource table (VGPRs, SGPRs, scratch, LDS, spills, occupancy) from AMDGPU
# assembly files and fails when any kernel spills registers or uses scratch memory.
# usage: ci/amdgpu-resource-report.sh DIR_WITH_.s_FILES
set -euo pipefail
dir=${1:?usage: $0 DIR_WITH_.s_FILES}
shopt -s nullglob
files=("$dir"/*.s)
if [ ${#files[@]} -eq 0 ]; then
  echo "no assembly files in $dir" >&2
  exit 2
fi
printf '| %-80s | %-7s | %5s | %5s | %7s | %6s | %6s | %4s |\n' kernel arch vgpr sgpr scratch lds spills occ
printf '|%s|\n' "$(printf -- '-%.0s' {1..144})"
status=0
for f in "${files[@]}"; do
  arch=$(basename "$f" .s); arch=${arch##*.}
  # One record per ".amdhsa_kernel NAME"; the "; Kernel info:" comment block that follows it and
  # the metadata's spill counts fill in the fields.
  out=$(awk -v arch="$arch" '
    /^[ \t]*\.amdhsa_kernel / { name=$2 }
    /^; Kernel info:/ { inblk=1 }
    inblk && /^; NumSgprs:/ { sgpr=$3 }
    inblk && /^; NumVgprs:/ { vgpr=$3 }
    inblk && /^; ScratchSize:/ { scratch=$3 }
    inblk && /^; LDSByteSize:/ { lds=$3 }
    inblk && /^; Occupancy:/ { occ=$3; k[++n]=name; V[n]=vgpr; S[n]=sgpr; SC[n]=scratch; L[n]=lds; O[n]=occ; inblk=0 }
    /\.sgpr_spill_count:/ { sp[++ns]=$2 }
    /\.vgpr_spill_count:/ { vp[++nv]=$2 }
    END {
      for (i=1;i<=n;i++) {
        spills = (sp[i]+0) + (vp[i]+0)
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k[i], arch, V[i], S[i], SC[i], L[i], spills, O[i]
      }
    }' "$f")
  while IFS=$'\t' read -r name a v s sc l sp o; do
    [ -n "$name" ] || continue
    short=$(echo "$name" | c++filt 2>/dev/null | sed 's/(anonymous namespace):://; s/(.*//' || echo "$name")
    short=${short:0:80}
    flag=""
    if [ "${sc:-0}" != "0" ] || [ "${sp:-0}" != "0" ]; then flag="  <- spills/scratch"; status=1; fi
    printf '| %-80s | %-7s | %5s | %5s | %7s | %6s | %6s | %4s |%s\n' "$short" "$a" "$v" "$s" "$sc" "$l" "$sp" "$o" "$flag"
  done <<< "$out"
done
exit $status
