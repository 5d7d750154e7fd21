#!/usr/bin/env bash
# --db: baselines measured beside the candidate are stored by task x device x torch x settings; the
# next run takes them from the store (unpaired estimate, said in the record) and measures only the
# candidate; --fresh-baselines measures again; another task is another key.
source "$(dirname "$0")/lib.sh"
ws=$(workspace stored)
count() { sqlite3 "$scratch/p.db" "select count(*) from results where stage = 'profile-baseline'"; }
profile --db "$scratch/p.db" "$ws" >"$scratch/first.json" || fail "first run exited $?"
[[ $(field .profile.baselines.source "$scratch/first.json") == measured ]] || fail "first run: $(jq -c .profile.baselines "$scratch/first.json")"
[[ $(field .profile.baselines.stored "$scratch/first.json") == true ]] || fail "first run did not store"
[[ $(count) == 1 ]] || fail "expected 1 stored baseline, found $(count)"
profile --db "$scratch/p.db" "$ws" >"$scratch/second.json" || fail "second run exited $?"
[[ $(field .profile.verdict "$scratch/second.json") == PASS ]] || fail "second: $(jq -c .profile "$scratch/second.json" | cut -c1-400)"
# On a loaded machine the unpaired comparison may flag the honest candidate; the profiler then
# measures again beside fresh baselines (checked deterministically below), and this run's store
# facts are not the ones to test.
if [[ $(field .profile.baselines.rechecked_after_stored_flag "$scratch/second.json") == false ]]; then
  [[ $(field .profile.baselines.source "$scratch/second.json") == store ]] || fail "second run did not use the store"
  [[ $(field .profile.pairing "$scratch/second.json") == unpaired* ]] || fail "pairing not said"
  [[ $(jq -c .profile.samples.eager "$scratch/first.json") == "$(jq -c .profile.samples.eager "$scratch/second.json")" ]] ||
    fail "the stored eager samples differ from the measured ones"
fi
[[ $(field .profile.baselines.key "$scratch/first.json") == "$(field .profile.baselines.key "$scratch/second.json")" ]] || fail "keys differ"
[[ $(count) == 1 ]] || fail "a cached baseline was stored again"
profile --db "$scratch/p.db" --fresh-baselines "$ws" >"$scratch/third.json" || fail "third run exited $?"
[[ $(field .profile.baselines.source "$scratch/third.json") == measured ]] || fail "--fresh-baselines used the store"
# A stored baseline that flags the honest candidate (its eager times rewritten to 1 s, as if the
# machine had been very slow then: the candidate looks far too fast): the flag is not trusted on
# stored baselines; the candidate is measured again beside fresh ones and passes, and the record
# says so.
sqlite3 "$scratch/p.db" "update results set value = json_set(value, '$.eager', json('[[1000,1000,1000],[1000,1000,1000],[1000,1000,1000],[1000,1000,1000]]')) where stage = 'profile-baseline'"
"$bin/cudaagent-profile" --device cpu --task "$base/model.py" --rounds 4 --round-ms 5 --warmup-ms 50 \
  --timeout 60 --db "$scratch/p.db" "$ws" >"$scratch/rechecked.json" 2>"$scratch/rechecked.log" || fail "recheck run exited $?"
[[ $(field .profile.verdict "$scratch/rechecked.json") == PASS ]] || fail "rechecked: $(jq -c .profile "$scratch/rechecked.json" | cut -c1-400)"
[[ $(field .profile.baselines.rechecked_after_stored_flag "$scratch/rechecked.json") == true ]] ||
  fail "the flag on stored baselines was not rechecked: $(jq -c .profile.baselines "$scratch/rechecked.json")"
[[ $(field .profile.baselines.source "$scratch/rechecked.json") == measured ]] || fail "the recheck did not measure its baselines"
grep -q "measuring again beside fresh baselines" "$scratch/rechecked.log" || fail "the recheck was not logged: $(cat "$scratch/rechecked.log")"
# Another task (different bytes): another key.
other=$(workspace other)
echo "# another task" >>"$other/model.py"
"$bin/cudaagent-profile" --quiet --device cpu --task "$other/model.py" --rounds 4 --round-ms 5 \
  --warmup-ms 50 --db "$scratch/p.db" "$other" >"$scratch/fourth.json" || fail "fourth run exited $?"
[[ $(field .profile.verdict "$scratch/fourth.json") == PASS ]] || fail "another task: $(jq -c .profile "$scratch/fourth.json" | cut -c1-300)"
[[ $(field .profile.baselines.source "$scratch/fourth.json") == measured ]] || fail "another task hit the store"
[[ $(count) == 2 ]] || fail "expected 2 stored baselines, found $(count)"
# --baseline-trace off: on the CPU nothing is traced either way, so the baselines are the same
# samples as with the default (on) and come from the store under the same key; the record names
# the setting.
profile --db "$scratch/p.db" --baseline-trace off "$ws" >"$scratch/untraced.json" || fail "--baseline-trace off exited $?"
[[ $(field .profile.settings.baseline_trace "$scratch/untraced.json") == off ]] ||
  fail "the record's settings: $(jq -c .profile.settings "$scratch/untraced.json")"
[[ $(field .profile.baselines.key "$scratch/untraced.json") == "$(field .profile.baselines.key "$scratch/first.json")" ]] ||
  fail "--baseline-trace off changed the CPU's baseline key"
[[ $(field .profile.settings.baseline_trace "$scratch/first.json") == on ]] || fail "the default is not on"
if profile --baseline-trace sometimes "$ws" >/dev/null 2>"$scratch/bad.log"; then fail "--baseline-trace sometimes was taken"; fi
echo ok
