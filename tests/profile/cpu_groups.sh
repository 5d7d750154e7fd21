#!/usr/bin/env bash
# --cpu-groups: the session's owner and its two runners each on a group of whole cores of their
# own. The record says where they ran (three disjoint CPU lists within the CPUs this test may use)
# or, on a machine of fewer than three cores, why they were not placed; the setting is part of
# the baselines' key. Without the flag the record says the scheduler placed them.
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
profile "$ws" >"$scratch/free.json" || fail "without --cpu-groups: exited $?"
jq -e '.profile.verdict == "PASS" and .profile.settings.cpu_groups == false
       and (.profile.placement.note | startswith("not asked"))' "$scratch/free.json" >/dev/null ||
  fail "without --cpu-groups: $(jq -c '[.profile.verdict, .profile.settings.cpu_groups, .profile.placement]' "$scratch/free.json")"

profile --cpu-groups "$ws" >"$scratch/placed.json" || fail "--cpu-groups: exited $?"
jq -e '.profile.verdict == "PASS" and .profile.settings.cpu_groups == true' "$scratch/placed.json" >/dev/null ||
  fail "--cpu-groups: $(jq -c '[.profile.verdict, .profile.reason, .profile.settings.cpu_groups]' "$scratch/placed.json")"
[[ $(field .profile.baselines.key "$scratch/placed.json") != $(field .profile.baselines.key "$scratch/free.json") ]] ||
  fail "one baseline key with and without --cpu-groups"

# The CPU lists, expanded: "0-2,5" -> 0 1 2 5.
expand() { tr ',' '\n' <<<"$1" | awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }'; }
allowed=$(taskset -pc $$ | sed 's/.*: //')
cores=$(for cpu in $(expand "$allowed"); do
  cat "/sys/devices/system/cpu/cpu$cpu/topology/physical_package_id" "/sys/devices/system/cpu/cpu$cpu/topology/core_id" 2>/dev/null |
    paste -sd: || echo "cpu$cpu"
done | sort -u | wc -l)
if ((cores >= 3)); then
  for role in owner baseline candidate; do
    list=$(field ".profile.placement.$role" "$scratch/placed.json")
    [[ -n $list && $list != null ]] || fail "$cores cores, but no CPUs for the $role: $(jq -c .profile.placement "$scratch/placed.json")"
    expand "$list" >"$scratch/$role"
  done
  [[ $(cat "$scratch/owner" "$scratch/baseline" "$scratch/candidate" | sort | uniq -d) == "" ]] ||
    fail "groups share CPUs: $(jq -c .profile.placement "$scratch/placed.json")"
  comm -23 <(cat "$scratch/owner" "$scratch/baseline" "$scratch/candidate" | sort) <(expand "$allowed" | sort) |
    grep -q . && fail "groups outside the allowed CPUs $allowed: $(jq -c .profile.placement "$scratch/placed.json")"
else
  jq -e --arg n "$cores physical cores" '.profile.placement.note | contains($n)' "$scratch/placed.json" >/dev/null ||
    fail "$cores cores: $(jq -c .profile.placement "$scratch/placed.json")"
fi
echo ok
