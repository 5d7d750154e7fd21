// The merge loop keeps the symbols of a word in a linked list and the candidate merges in a heap,
// exactly as `tokenizers` does, including its check that a popped entry still names the pair now
// at that place (entries go stale when a neighbour merged first): same ranks, same ties, same ids.
#include "bpe_model.h"

#include <queue>

#include "utf8.h"

namespace cudaagent::train::detail {

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      utf8_append(t[static_cast<std::size_t>(b)], printable ? static_cast<char32_t>(b) : next++);
    }
    return t;
  }();
  return table;
}

int unicode_to_byte(char32_t c) {
  if ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) {
    return static_cast<int>(c);
  }
  if (c < 256 || c >= 256 + 68) return -1;
  // The 68 remapped bytes, in increasing byte order.
  int index = static_cast<int>(c - 256);
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (!printable && index-- == 0) return b;
  }
  return -1;
}

bool byte_level_decode(std::string_view token, std::string& out) {
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    const std::size_t n = utf8_sequence_length(token, i);
    if (n == 0) return false;
    const int b = unicode_to_byte(utf8_decode(token, i, n));
    if (b < 0) return false;
    bytes.push_back(static_cast<char>(b));
    i += n;
  }
  out += bytes;
  return true;
}

Result<BpeModel> BpeModel::build(std::unordered_map<std::string, TokenId> vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 bool ignore_merges) {
  BpeModel model;
  model.ignore_merges_ = ignore_merges;
  TokenId max_id = -1;
  for (const auto& [text, id] : vocab) {
    if (id < 0) return Status::error("vocabulary entry with a negative id");
    max_id = std::max(max_id, id);
  }
  model.id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  model.has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
  for (const auto& [text, id] : vocab) {
    model.id_to_token_[static_cast<std::size_t>(id)] = text;
    model.has_id_[static_cast<std::size_t>(id)] = true;
  }
  const auto& table = byte_to_unicode();
  for (std::size_t b = 0; b < 256; ++b) {
    const auto it = vocab.find(table[b]);
    model.byte_ids_[b] = it == vocab.end() ? -1 : it->second;
  }
  model.merges_.reserve(merges.size());
  std::uint32_t rank = 0;
  for (const auto& [left, right] : merges) {
    const auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(left + right);
    if (l == vocab.end() || r == vocab.end() || m == vocab.end()) {
      return Status::error("merge '" + left + " " + right + "' names a token not in the vocabulary");
    }
    // A repeated pair takes its last rank: `tokenizers` collects the list into a map in order.
    model.merges_.insert_or_assign(pair_key(l->second, r->second), Merge{rank, m->second});
    ++rank;
  }
  model.vocab_ = std::move(vocab);
  return model;
}

const std::string* BpeModel::token(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= has_id_.size() || !has_id_[static_cast<std::size_t>(id)]) {
    return nullptr;
  }
  return &id_to_token_[static_cast<std::size_t>(id)];
}

const BpeModel::Merge* BpeModel::find_merge(TokenId left, TokenId right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_word(std::string_view bytes, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    std::string mapped;
    for (const char c : bytes) mapped += byte_to_unicode()[static_cast<unsigned char>(c)];
    if (const auto it = vocab_.find(mapped); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    TokenId id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(bytes.size());
  for (const char c : bytes) {
    const TokenId id = byte_ids_[static_cast<unsigned char>(c)];
    if (id < 0) continue;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    std::uint32_t rank;
    int pos;
    TokenId result;
  };
  // The heap's top is the lowest rank, then the leftmost position.
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int>(i), m->result});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const Merge* current = find_merge(left.id, right.id);
    if (current == nullptr || current->result != top.result) continue;  // stale entry
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* m = find_merge(symbols[static_cast<std::size_t>(left.prev)].id, left.id)) {
        queue.push({m->rank, left.prev, m->result});
      }
    }
    if (left.next >= 0) {
      if (const Merge* m = find_merge(left.id, symbols[static_cast<std::size_t>(left.next)].id)) {
        queue.push({m->rank, top.pos, m->result});
      }
    }
  }
  for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    out.push_back(symbols[static_cast<std::size_t>(i)].id);
  }
}

}  // namespace cudaagent::train::detail
