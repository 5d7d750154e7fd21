// A byte-level BPE tokenizer read from a Hugging Face `tokenizer.json`, giving the same ids as the
// `tokenizers` library for the pipelines Qwen2, Llama 3 and GPT-2 style models use: added and
// special tokens matched first (leftmost-longest, as HF does), a Unicode normaliser (utf8proc),
// regex Split pre-tokenisers (PCRE2 with UTF and UCP), the ByteLevel mapping, ranked merges.
// Anything else in a tokenizer.json (a WordPiece model, a Metaspace pre-tokeniser, a Replace
// normaliser, ...) is refused at load with the name of the part, never silently approximated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::train {

using TokenId = std::int32_t;

class Tokenizer {
 public:
  // Reads `path`: a tokenizer.json, or a directory holding one. A Status names the file and the
  // part that is missing or not supported.
  static Result<Tokenizer> load(const std::string& path);
  // The same from the file's text (`origin` names it in messages).
  static Result<Tokenizer> from_json(std::string_view json, const std::string& origin);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`, with added and special tokens in the text matched as tokens: what
  // `tokenizer.encode(text, add_special_tokens=False)` returns in Hugging Face. No BOS/EOS is
  // added (a chat template writes its own special tokens). A Status for text that is not UTF-8.
  // Thread-safe.
  Result<std::vector<TokenId>> encode(std::string_view text) const;

  // The bytes the ids stand for, concatenated (a token may end inside a UTF-8 sequence, so this
  // is not always UTF-8). Special tokens are left out when `skip_special`. Unknown ids are
  // skipped. Thread-safe.
  std::string decode_bytes(std::span<const TokenId> ids, bool skip_special = false) const;
  // decode_bytes made UTF-8 the way `tokenizers` does (each maximal invalid subsequence becomes
  // U+FFFD): the text Hugging Face's `decode(ids, skip_special_tokens=...)` returns.
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const;

  // The id of a token given by its text (an added token's content, or a vocabulary entry in the
  // byte-level alphabet); nothing when there is none.
  std::optional<TokenId> token_id(std::string_view token) const;
  bool is_special(TokenId id) const;
  // One more than the largest id (vocabulary and added tokens): Hugging Face's len(tokenizer).
  TokenId size() const;
  // Lowercase hex SHA-256 of the tokenizer.json bytes: the fingerprint trajectories record.
  const std::string& sha256() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;
};

// `bytes` made valid UTF-8, each maximal invalid subsequence replaced by U+FFFD (Unicode's
// recommended practice, and what Rust's String::from_utf8_lossy does).
std::string utf8_lossy(std::string_view bytes);

}  // namespace cudaagent::train
