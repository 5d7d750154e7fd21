// Issue 10, class 4: constant evaluation that keeps the compiler busy for minutes (each loop stays
// under gcc's iteration limit; together they run for ~2^33 operations). The CPU-time limit ends
// it: FAIL_RESOURCE. (flags lowers the limit to 5 s so the case is quick.)
constexpr long burn() {
  long sum = 0;
  for (long i = 0; i < 200000; ++i) {
    for (long j = 0; j < 200000; ++j) sum += i ^ j;
  }
  return sum;
}
constexpr long kBurnt = burn();
