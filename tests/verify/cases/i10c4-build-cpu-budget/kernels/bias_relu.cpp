// Issue 10, class 4: the whole build's CPU budget (6 s in flags), spent by a compile that would
// run for minutes: each command's CPU limit is lowered to what the budget has left, and what
// comes after finds the budget spent: FAIL_RESOURCE.
constexpr long burn() {
  long sum = 0;
  for (long i = 0; i < 200000; ++i) {
    for (long j = 0; j < 200000; ++j) sum += i ^ j;
  }
  return sum;
}
constexpr long kBurnt = burn();
