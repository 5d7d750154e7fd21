// Fingerprints and the inverted index behind cudaagent-dedup. Scoring a query costs one counter
// increment per (shared value, document holding it) pair: a value no document holds costs
// nothing, and no document is merged value by value. Documents are dealt round-robin to shards so
// the threads get equal work as the stream grows.
#include "cudaagent/dedup/measure.h"

#include <algorithm>

namespace cudaagent {
namespace {

// splitmix64's finaliser: a bijection that spreads every input bit over the output.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t token_hash(std::string_view token) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (const char c : token) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return mix(h);
}

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

using Fraction = SimilarityIndex::Fraction;

}  // namespace

// a < b, exactly (denominators are positive and below 2^32).
bool SimilarityIndex::less(Fraction a, Fraction b) { return a.num * b.den < b.num * a.den; }

namespace {

// |shared| / |a ∪ b| for sets of sizes a and b; two empty sets are equal (1).
Fraction jaccard_fraction(std::uint64_t shared, std::uint64_t a, std::uint64_t b) {
  if (a == 0 && b == 0) return {1, 1};
  return {shared, a + b - shared};
}

}  // namespace

GramSet hashed_grams(std::string_view tokens, std::size_t k) {
  std::vector<std::uint64_t> hashes;
  std::size_t at = 0;
  while (at < tokens.size()) {
    const std::size_t start = tokens.find_first_not_of(' ', at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(tokens.find(' ', start), tokens.size());
    hashes.push_back(token_hash(tokens.substr(start, end - start)));
    at = end;
  }
  if (hashes.empty()) return {};
  const std::size_t n = std::min(std::max<std::size_t>(k, 1), hashes.size());
  GramSet grams;
  grams.reserve(hashes.size() - n + 1);
  for (std::size_t i = 0; i + n <= hashes.size(); ++i) {
    std::uint64_t h = n;
    for (std::size_t j = 0; j < n; ++j) h = mix(h + hashes[i + j]);
    grams.push_back(h);
  }
  // The r-th repeat of a gram (r >= 1) becomes a value of its own: multiset -> set.
  std::sort(grams.begin(), grams.end());
  GramSet tagged;
  tagged.reserve(grams.size());
  std::uint64_t repeat = 0;
  for (std::size_t i = 0; i < grams.size(); ++i) {
    repeat = i > 0 && grams[i] == grams[i - 1] ? repeat + 1 : 0;
    tagged.push_back(repeat == 0 ? grams[i] : mix(grams[i] ^ (repeat * kGolden)));
  }
  std::sort(tagged.begin(), tagged.end());
  // A tag colliding with another gram is a 2^-64 event; unique keeps the set a set.
  tagged.erase(std::unique(tagged.begin(), tagged.end()), tagged.end());
  return tagged;
}

double jaccard(const GramSet& a, const GramSet& b) {
  std::uint64_t shared = 0;
  auto i = a.begin(), j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      ++shared, ++i, ++j;
    }
  }
  const Fraction f = jaccard_fraction(shared, a.size(), b.size());
  return static_cast<double>(f.num) / static_cast<double>(f.den);
}

Fingerprint make_fingerprint(std::string_view tokens, std::string_view ops) {
  return {hashed_grams(tokens, kDedupGramLength), hashed_grams(ops, 1)};
}

double fingerprint_similarity(const Fingerprint& a, const Fingerprint& b) {
  return std::min(jaccard(a.shape, b.shape), jaccard(a.ops, b.ops));
}

struct SimilarityIndex::Shard {
  // feature id -> local document numbers, per family
  std::vector<std::vector<std::uint32_t>> shape_postings, ops_postings;
  std::vector<std::uint32_t> shape_sizes, ops_sizes;    // per local document
  std::vector<std::uint32_t> global;                    // local document -> document number
  std::vector<std::uint32_t> shape_counts, ops_counts;  // scratch: shared values per document
};

SimilarityIndex::SimilarityIndex(int jobs, std::uint64_t parallel_work)
    : parallel_work_(parallel_work) {
  const std::size_t shards = static_cast<std::size_t>(std::max(jobs, 1));
  for (std::size_t i = 0; i < shards; ++i) shards_.push_back(std::make_unique<Shard>());
  shard_best_.resize(shards);
  for (std::size_t i = 1; i < shards; ++i) workers_.emplace_back([this, i] { run_worker(i); });
}

SimilarityIndex::~SimilarityIndex() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

std::uint32_t SimilarityIndex::add(const Fingerprint& fingerprint) {
  const auto document = static_cast<std::uint32_t>(documents_++);
  Shard& shard = *shards_[document % shards_.size()];
  const auto local = static_cast<std::uint32_t>(shard.global.size());
  auto post = [local](Family& family, const GramSet& values,
                      std::vector<std::vector<std::uint32_t>>& postings) {
    for (const std::uint64_t value : values) {
      const auto [it, inserted] =
          family.ids.try_emplace(value, static_cast<std::uint32_t>(family.ids.size()));
      if (inserted) family.documents.push_back(0);
      ++family.documents[it->second];
      if (postings.size() <= it->second) postings.resize(family.ids.size());
      postings[it->second].push_back(local);
    }
  };
  post(shape_, fingerprint.shape, shard.shape_postings);
  post(ops_, fingerprint.ops, shard.ops_postings);
  shard.shape_sizes.push_back(static_cast<std::uint32_t>(fingerprint.shape.size()));
  shard.ops_sizes.push_back(static_cast<std::uint32_t>(fingerprint.ops.size()));
  shard.global.push_back(document);
  shard.shape_counts.push_back(0);
  shard.ops_counts.push_back(0);
  return document;
}

// Ranked by the score, then by the other similarity, so that among tasks whose ops all differ
// the one of the nearest shape is named.
bool SimilarityIndex::better(const Best& a, const Best& b) {
  const auto [a_low, a_high] = std::minmax(a.shape, a.ops, less);
  const auto [b_low, b_high] = std::minmax(b.shape, b.ops, less);
  if (less(b_low, a_low)) return true;
  if (less(a_low, b_low)) return false;
  return less(b_high, a_high);
}

void SimilarityIndex::score_shard(std::size_t index, Best& best) {
  Shard& shard = *shards_[index];
  best = Best{0, {}, {}, false};
  auto count = [](const Family& family, const std::vector<std::vector<std::uint32_t>>& postings,
                  std::uint32_t* counts) {
    for (const std::uint32_t id : family.query_ids) {
      if (id >= postings.size()) continue;
      for (const std::uint32_t local : postings[id]) ++counts[local];
    }
  };
  count(shape_, shard.shape_postings, shard.shape_counts.data());
  count(ops_, shard.ops_postings, shard.ops_counts.data());
  for (std::size_t local = 0; local < shard.global.size(); ++local) {
    const std::uint64_t shared_shape = shard.shape_counts[local];
    const std::uint64_t shared_ops = shard.ops_counts[local];
    shard.shape_counts[local] = shard.ops_counts[local] = 0;
    if (shared_shape == 0) continue;  // nothing in common: not a neighbour
    const Fraction shape =
        jaccard_fraction(shared_shape, shape_.query_size, shard.shape_sizes[local]);
    const Fraction ops = jaccard_fraction(shared_ops, ops_.query_size, shard.ops_sizes[local]);
    const Best candidate{shard.global[local], shape, ops};
    // Locals ascend with the document number, so the first of equals stays.
    if (!best.found || better(candidate, best)) best = candidate;
  }
}

void SimilarityIndex::run_worker(std::size_t shard) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    score_shard(shard, shard_best_[shard]);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

SimilarityIndex::Nearest SimilarityIndex::nearest(const Fingerprint& query) {
  std::uint64_t work = 0;  // counter increments this query will cost
  for (auto [family, values] : {std::pair{&shape_, &query.shape}, std::pair{&ops_, &query.ops}}) {
    family->query_ids.clear();
    for (const std::uint64_t value : *values) {
      if (const auto it = family->ids.find(value); it != family->ids.end()) {
        family->query_ids.push_back(it->second);
        work += family->documents[it->second];
      }
    }
    family->query_size = values->size();
  }
  if (shape_.query_ids.empty()) return {};
  // Waking the workers costs microseconds (far more on a loaded machine); below this much work
  // the caller scores every shard itself.
  const bool parallel = !workers_.empty() && work + documents_ >= parallel_work_;
  if (parallel) {
    {
      std::lock_guard lock(mutex_);
      ++generation_;
      pending_ = workers_.size();
    }
    wake_.notify_all();
    score_shard(0, shard_best_[0]);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
  } else {
    for (std::size_t shard = 0; shard < shards_.size(); ++shard) {
      score_shard(shard, shard_best_[shard]);
    }
  }
  std::optional<Best> best;
  for (const Best& candidate : shard_best_) {
    if (!candidate.found) continue;
    if (!best || better(candidate, *best) ||
        (!better(*best, candidate) && candidate.document < best->document)) {
      best = candidate;
    }
  }
  if (!best) return {};
  auto value = [](Fraction f) { return static_cast<double>(f.num) / static_cast<double>(f.den); };
  const double shape = value(best->shape), ops = value(best->ops);
  return {best->document, std::min(shape, ops), shape, ops};
}

}  // namespace cudaagent
