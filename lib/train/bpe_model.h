// The BPE model inside a byte-level tokenizer: the GPT-2 byte <-> character table, the vocabulary
// and the ranked merges, and the merge loop (the same priority order as `tokenizers`: lowest rank
// first, leftmost first among equal ranks). Internal to lib/train.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/tokenizer.h"

namespace cudaagent::train::detail {

// GPT-2's reversible map from bytes to printable characters: bytes that are printable Latin-1
// map to themselves, the other 68 to U+0100.. in order. Each entry is the character as UTF-8.
const std::array<std::string, 256>& byte_to_unicode();
// The inverse, for decoding: code point -> byte, or -1 for a code point outside the table.
int unicode_to_byte(char32_t code_point);

// The bytes a byte-level token string stands for. False (and `out` untouched) if a character of
// `token` is outside the table; `tokenizers` then decodes the token as its own UTF-8 text.
bool byte_level_decode(std::string_view token, std::string& out);

class BpeModel {
 public:
  // `merges` are pairs of vocabulary strings in rank order. A merge whose parts or result are not
  // in the vocabulary is an error (the file is inconsistent).
  static Result<BpeModel> build(std::unordered_map<std::string, TokenId> vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                bool ignore_merges);

  // Appends the ids of one pre-token, given as raw bytes (the byte-level mapping is applied
  // here). Bytes whose character is missing from the vocabulary are dropped, as `tokenizers`
  // does for a BPE with no unknown token.
  void encode_word(std::string_view bytes, std::vector<TokenId>& out) const;

  const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }
  // The vocabulary string of `id`, or nullptr when `id` is not in the vocabulary.
  const std::string* token(TokenId id) const;

 private:
  struct Merge {
    std::uint32_t rank;
    TokenId result;
  };
  static std::uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  const Merge* find_merge(TokenId left, TokenId right) const;

  std::unordered_map<std::string, TokenId> vocab_;
  std::vector<std::string> id_to_token_;  // empty strings for ids the vocabulary lacks
  std::vector<bool> has_id_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::array<TokenId, 256> byte_ids_{};   // -1 where the byte's character is not in the vocabulary
  bool ignore_merges_ = false;
};

}  // namespace cudaagent::train::detail
