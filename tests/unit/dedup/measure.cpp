// The dedup measure: hashed k-grams (repeats kept, as a multiset), the Jaccard similarity's
// properties, the min over shape and ops, and the inverted index agreeing with brute force exactly.
#include "cudaagent/dedup/measure.h"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using cudaagent::Fingerprint;
using cudaagent::fingerprint_similarity;
using cudaagent::GramSet;
using cudaagent::hashed_grams;
using cudaagent::jaccard;
using cudaagent::make_fingerprint;
using cudaagent::SimilarityIndex;

namespace {

// A random token sequence over a small vocabulary, so that k-grams repeat and overlap.
std::string random_tokens(std::mt19937& rng, std::size_t length, int vocabulary) {
  std::uniform_int_distribution<int> pick(0, vocabulary - 1);
  std::string text;
  for (std::size_t i = 0; i < length; ++i) {
    if (i > 0) text += ' ';
    text += "t" + std::to_string(pick(rng));
  }
  return text;
}

Fingerprint random_fingerprint(std::mt19937& rng) {
  return make_fingerprint(random_tokens(rng, 5 + rng() % 80, 6), random_tokens(rng, rng() % 6, 5));
}

GramSet grams4(const std::string& tokens) { return hashed_grams(tokens, 4); }

}  // namespace

TEST_CASE("hashed grams: one value per k-gram, repeats included") {
  CHECK(grams4("").empty());
  CHECK(grams4("   ").empty());
  CHECK(grams4("a").size() == 1);
  CHECK(grams4("a b c").size() == 1);  // shorter than k: one gram of everything
  CHECK(grams4("a b c d").size() == 1);
  CHECK(grams4("a b c d e").size() == 2);
  // Six equal tokens hold the same 4-gram three times: three distinct values, not one.
  CHECK(grams4("x x x x x x").size() == 3);
  CHECK(hashed_grams("a a b", 1).size() == 3);
  // Spacing is not part of the tokens.
  CHECK(grams4("  a  b c   d e ") == grams4("a b c d e"));
  // Sorted and distinct.
  const GramSet g = grams4("a b a b a b a b c");
  for (std::size_t i = 1; i < g.size(); ++i) CHECK(g[i - 1] < g[i]);
  // Ordered: the same tokens in another order are another sequence.
  CHECK(grams4("a b c d") != grams4("d c b a"));
  CHECK(hashed_grams("a b", 1) == hashed_grams("b a", 1));  // unigrams are a bag
}

TEST_CASE("jaccard: identity, symmetry, range, and known values") {
  const GramSet a = grams4("a b c d e");  // abcd bcde
  const GramSet b = grams4("a b c d f");  // abcd bcdf
  CHECK(jaccard(a, a) == 1.0);
  CHECK(jaccard(a, b) == doctest::Approx(1.0 / 3.0));
  CHECK(jaccard(a, grams4("p q r s")) == 0.0);
  CHECK(jaccard({}, {}) == 1.0);
  CHECK(jaccard(a, {}) == 0.0);
  // Multiset, not set: one xxxx against two of them shares one of two.
  CHECK(jaccard(grams4("x x x x"), grams4("x x x x x")) == doctest::Approx(0.5));
  CHECK(jaccard(hashed_grams("relu relu", 1), hashed_grams("relu", 1)) == doctest::Approx(0.5));

  std::string base;
  for (int i = 0; i < 100; ++i) base += "t" + std::to_string(i) + " ";
  std::string one = base;
  one.replace(one.find("t50 "), 4, "zz ");
  // 97 grams, 4 of them touched by one changed token: 93 shared of 101.
  CHECK(jaccard(grams4(base), grams4(one)) == doctest::Approx(93.0 / 101.0));
}

TEST_CASE("fingerprint similarity is the lower of shape and ops, with the measure's properties") {
  const Fingerprint conv = make_fingerprint("a b c d e f g h", "conv relu");
  const Fingerprint swapped = make_fingerprint("a b c d e f g h", "conv sigmoid");
  CHECK(fingerprint_similarity(conv, conv) == 1.0);
  CHECK(fingerprint_similarity(conv, swapped) == doctest::Approx(1.0 / 3.0));  // ops decide
  const Fingerprint reshaped = make_fingerprint("a b c d e f g x", "conv relu");
  CHECK(fingerprint_similarity(conv, reshaped) == doctest::Approx(4.0 / 6.0));  // shape decides
  // No ops on either side does not lower the score; ops on one side only make it 0.
  CHECK(fingerprint_similarity(make_fingerprint("a b c d", ""), make_fingerprint("a b c d", "")) ==
        1.0);
  CHECK(fingerprint_similarity(make_fingerprint("a b c d", ""), make_fingerprint("a b c d", "x")) ==
        0.0);

  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const Fingerprint x = random_fingerprint(rng);
    const Fingerprint y = random_fingerprint(rng);
    const double xy = fingerprint_similarity(x, y);
    CHECK(xy == fingerprint_similarity(y, x));
    CHECK(xy >= 0.0);
    CHECK(xy <= 1.0);
    CHECK(fingerprint_similarity(x, x) == 1.0);
  }
}

TEST_CASE("the index finds exactly what brute force finds, on any number of threads") {
  std::mt19937 rng(11);
  std::vector<Fingerprint> stored;
  for (int i = 0; i < 300; ++i) stored.push_back(random_fingerprint(rng));
  // Exact copies, so ties between documents must go to the first.
  stored.push_back(stored[17]);
  stored.push_back(stored[3]);
  // parallel_work 0: every query on all threads; the default: these small queries on one.
  for (const auto& [jobs, parallel_work] :
       {std::pair{1, SimilarityIndex::kParallelWork}, std::pair{2, std::uint64_t{0}},
        std::pair{3, std::uint64_t{0}}, std::pair{8, std::uint64_t{0}},
        std::pair{3, SimilarityIndex::kParallelWork}}) {
    CAPTURE(jobs);
    CAPTURE(parallel_work);
    SimilarityIndex index(jobs, parallel_work);
    for (const Fingerprint& f : stored) index.add(f);
    CHECK(index.size() == stored.size());
    int found_some = 0;
    for (int q = 0; q < 80; ++q) {
      const Fingerprint query = q < 2 ? stored[q == 0 ? 17 : 3] : random_fingerprint(rng);
      // Highest min(shape, ops), then highest max(shape, ops), then the first; only documents
      // sharing a shape gram count.
      std::pair<double, double> best{-1, -1};
      std::optional<std::uint32_t> best_document;
      for (std::uint32_t d = 0; d < stored.size(); ++d) {
        const double shape = jaccard(query.shape, stored[d].shape);
        const double ops = jaccard(query.ops, stored[d].ops);
        const std::pair<double, double> rank{std::min(shape, ops), std::max(shape, ops)};
        if (shape > 0 && rank > best) best = rank, best_document = d;
      }
      const SimilarityIndex::Nearest found = index.nearest(query);
      CHECK(found.document == best_document);
      if (best_document) {
        CHECK(found.score == doctest::Approx(best.first).epsilon(1e-12));
        CHECK(found.shape == doctest::Approx(jaccard(query.shape, stored[*best_document].shape)));
        CHECK(found.ops == doctest::Approx(jaccard(query.ops, stored[*best_document].ops)));
      }
      found_some += found.document.has_value();
    }
    CHECK(found_some > 40);  // the comparison above is not only "none == none"
  }
}

TEST_CASE("the index: nothing stored, nothing shared") {
  SimilarityIndex index(2, 0);
  const Fingerprint query = make_fingerprint("a b c d e f", "relu");
  CHECK_FALSE(index.nearest(query).document.has_value());
  index.add(make_fingerprint("p q r s t", "relu"));
  const SimilarityIndex::Nearest none = index.nearest(query);
  CHECK_FALSE(none.document.has_value());
  CHECK(none.score == 0.0);
  // Same shape, no op in common: the nearest, with score 0.
  index.add(make_fingerprint("a b c d e f", "tanh"));
  const SimilarityIndex::Nearest zero = index.nearest(query);
  REQUIRE(zero.document.has_value());
  CHECK(*zero.document == 1);
  CHECK(zero.score == 0.0);
  index.add(make_fingerprint("a b c d x", "relu"));
  const SimilarityIndex::Nearest one = index.nearest(query);
  REQUIRE(one.document.has_value());
  CHECK(*one.document == 2);
  CHECK(one.score == doctest::Approx(1.0 / 4.0));  // abcd shared; abcd bcde cdef ∪ bcdx
  // Equal scores: the higher other similarity wins, then the earlier document.
  SimilarityIndex ties(1);
  ties.add(make_fingerprint("a b c d x y", "relu"));  // shape 1/5, ops 1/2
  ties.add(make_fingerprint("a b c d e y", "relu"));  // shape 2/4, ops 1/2
  ties.add(make_fingerprint("a b c d e z", "relu"));  // the same again
  const SimilarityIndex::Nearest tie = ties.nearest(make_fingerprint("a b c d e f", "relu gelu"));
  REQUIRE(tie.document.has_value());
  CHECK(*tie.document == 1);
  CHECK(tie.score == doctest::Approx(0.5));
}
