// The similarity measure of cudaagent-dedup (man/cudaagent-dedup.1, SIMILARITY): two tasks are as
// similar as the lower of two multiset Jaccard similarities, of their code shape (the hashed
// 4-grams of the normalised AST token sequence) and of their op composition (the API names the
// model uses). A near-duplicate must be near in both: the same ops in another arrangement, or the
// same arrangement with one op swapped, is a different task.
// Key design choice: the i-th repeat of a value hashes to a value of its own, so multisets become
// plain sets of 64-bit values, and an inverted index scores one task against thousands by counting
// shared values, never touching the values it does not share.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace cudaagent {

// Names the tokens (dedup_features.h's kAstTokensVersion) and the scoring together; it changes
// whenever either would give another score. Written into every dedup record.
inline constexpr std::string_view kDedupMeasure = "ast-tokens-1/min-jaccard-4grams-ops";
inline constexpr std::size_t kDedupGramLength = 4;

// A multiset of hashed k-grams as a sorted set of distinct 64-bit values (the n-th repeat of a
// k-gram is a value of its own).
using GramSet = std::vector<std::uint64_t>;

// The k-grams (k >= 1) of a space-separated token sequence (runs of spaces count as one). A
// sequence shorter than k tokens is one gram of all its tokens; no tokens give an empty set.
// Pure and thread-safe.
GramSet hashed_grams(std::string_view tokens, std::size_t k);

// |a ∩ b| / |a ∪ b| in [0, 1]; symmetric; 1 for equal sets, two empty ones included.
double jaccard(const GramSet& a, const GramSet& b);

struct Fingerprint {
  GramSet shape;  // kDedupGramLength-grams of the normalised token sequence
  GramSet ops;    // the op names, one value per use
  bool operator==(const Fingerprint&) const = default;
};

// From the AST helper's "tokens" and "ops" (dedup_features.h). Pure and thread-safe.
Fingerprint make_fingerprint(std::string_view tokens, std::string_view ops);

// min(jaccard(a.shape, b.shape), jaccard(a.ops, b.ops)): in [0, 1], symmetric, 1 for equal
// fingerprints. Pure and thread-safe.
double fingerprint_similarity(const Fingerprint& a, const Fingerprint& b);

// The fingerprints of the reference sets plus those added while a stream runs, answering "which
// stored fingerprint is most similar to this one". Documents are numbered 0, 1, ... in the order
// added; fingerprints with an empty shape are never found (the stage never stores one). With
// `jobs` > 1 the documents are dealt round-robin to that many shards and nearest() scores them on
// that many threads (the caller's among them) when a query is big enough to pay for waking them.
// Not thread-safe: one caller at a time.
class SimilarityIndex {
 public:
  // Counter increments (plus documents to scan) from which a query is worth several threads:
  // about a millisecond of work, many times what waking the threads costs.
  static constexpr std::uint64_t kParallelWork = std::uint64_t{1} << 18;

  explicit SimilarityIndex(int jobs = 1, std::uint64_t parallel_work = kParallelWork);
  ~SimilarityIndex();
  SimilarityIndex(const SimilarityIndex&) = delete;
  SimilarityIndex& operator=(const SimilarityIndex&) = delete;

  // Stores `fingerprint` and returns its document number.
  std::uint32_t add(const Fingerprint& fingerprint);
  std::size_t size() const { return documents_; }

  struct Nearest {
    std::optional<std::uint32_t> document;  // none when no stored document shares a k-gram
    double score = 0.0;                     // fingerprint_similarity with that document:
    double shape = 0.0, ops = 0.0;          // the lower of these two Jaccard similarities
  };
  // Among the stored documents that share at least one shape k-gram with `query`: the one with
  // the highest score; among equal scores, the one whose other similarity (the larger of shape
  // and ops) is higher; then the lowest-numbered. Exact: no rounding decides a rank.
  Nearest nearest(const Fingerprint& query);

  // A similarity as the exact fraction it is, so that comparisons never round.
  struct Fraction {
    std::uint64_t num = 0, den = 1;
  };

 private:
  struct Shard;
  struct Best {
    std::uint32_t document = 0;
    Fraction shape, ops;
    bool found = true;
  };
  static bool less(Fraction a, Fraction b);
  static bool better(const Best& a, const Best& b);
  // One feature family (shape or ops): value -> feature id, and the query's ids.
  struct Family {
    std::unordered_map<std::uint64_t, std::uint32_t> ids;
    std::vector<std::uint32_t> documents;  // per feature id: documents holding it
    std::vector<std::uint32_t> query_ids;  // the query's values that some document has
    std::uint64_t query_size = 0;
  };
  void score_shard(std::size_t shard, Best& best);
  void run_worker(std::size_t shard);

  std::uint64_t parallel_work_;
  std::size_t documents_ = 0;
  Family shape_, ops_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<Best> shard_best_;

  // Worker threads for shards 1..n-1; the caller scores shard 0.
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::uint64_t generation_ = 0;
  std::size_t pending_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cudaagent
