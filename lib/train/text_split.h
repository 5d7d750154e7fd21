// The text stages in front of BPE: Unicode normalisation (utf8proc), regex splitting (PCRE2 with
// UTF and UCP, the Perl-style dialect tokenizer.json patterns are written in), and the matcher
// that cuts added tokens out of the text before anything else sees it. Internal to lib/train.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/tokenizer.h"

namespace cudaagent::train::detail {

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// `text` (valid UTF-8) in the normal form. A Status only if utf8proc refuses the text.
Result<std::string> normalize(std::string_view text, NormalForm form);

// A compiled pattern that splits text the way `tokenizers`' Split(behavior="Isolated") does:
// each match is a piece, and so is each non-empty stretch between matches. Thread-safe.
class RegexSplitter {
 public:
  static Result<RegexSplitter> compile(std::string_view pattern);
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  ~RegexSplitter();
  // Appends the pieces of `text` (valid UTF-8) to `out`, as views into `text`. A Status when
  // PCRE2 gives up (a resource limit), naming the reason.
  Status split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  RegexSplitter() = default;
  void* code_ = nullptr;  // pcre2_code_8*, opaque here so users need no PCRE2 header
  bool jit_ = false;
};

struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// A stretch of text, or an added token (id >= 0) with the text it consumed.
struct Segment {
  std::string_view text;
  TokenId added = -1;
};

// Finds added tokens leftmost-longest, non-overlapping (what `tokenizers` asks of its
// Aho-Corasick automaton), honouring single_word, lstrip and rstrip.
class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  // Appends the segments of `text` to `out` (views into `text`).
  void split(std::string_view text, std::vector<Segment>& out) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<std::size_t>> by_first_byte_;  // token indices, longest content first
};

}  // namespace cudaagent::train::detail
