// Loading tokenizer.json and running its pipeline in Hugging Face's order: added tokens that are
// matched on the raw text, then the normaliser, then added tokens matched on normalised text, then
// the pre-tokenisers (Split regexes, ByteLevel), then BPE on each piece.
#include "cudaagent/train/tokenizer.h"

#include <simdjson.h>

#include <filesystem>
#include <optional>
#include <unordered_map>

#include "bpe_model.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/base/sha256.h"
#include "text_split.h"
#include "utf8.h"

namespace cudaagent::train {
namespace {

using detail::AddedToken;
using detail::BpeModel;
using detail::NormalForm;
using detail::RegexSplitter;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// GPT-2's own split, used by a ByteLevel pre-tokeniser with use_regex.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct PreStep {
  std::optional<RegexSplitter> split;  // a regex split; none for a ByteLevel step without one
  bool byte_level = false;             // the ByteLevel step (its prefix space, then its regex)
  bool add_prefix_space = false;
};

std::string_view string_or(element e, std::string_view key, std::string_view fallback) {
  std::string_view value;
  return e[key].get(value) == simdjson::SUCCESS ? value : fallback;
}

bool bool_or(element e, std::string_view key, bool fallback) {
  bool value = false;
  return e[key].get(value) == simdjson::SUCCESS ? value : fallback;
}

bool is_null_or_missing(element e, std::string_view key) {
  element value;
  return e[key].get(value) != simdjson::SUCCESS || value.is_null();
}

Status read_normalizer(element e, std::vector<NormalForm>& out) {
  if (e.is_null()) return Status::ok();
  const std::string_view type = string_or(e, "type", "");
  if (type == "Sequence") {
    array list;
    if (e["normalizers"].get(list) != simdjson::SUCCESS) return Status::error("normalizer Sequence without a list");
    for (element item : list) {
      if (Status s = read_normalizer(item, out); !s) return s;
    }
    return Status::ok();
  }
  if (type == "NFC") out.push_back(NormalForm::kNFC);
  else if (type == "NFD") out.push_back(NormalForm::kNFD);
  else if (type == "NFKC") out.push_back(NormalForm::kNFKC);
  else if (type == "NFKD") out.push_back(NormalForm::kNFKD);
  else return Status::error("normalizer '" + std::string(type) + "' is not supported");
  return Status::ok();
}

Status read_pre_tokenizer(element e, std::vector<PreStep>& out) {
  const std::string_view type = string_or(e, "type", "");
  if (type == "Sequence") {
    array list;
    if (e["pretokenizers"].get(list) != simdjson::SUCCESS) return Status::error("pre_tokenizer Sequence without a list");
    for (element item : list) {
      if (Status s = read_pre_tokenizer(item, out); !s) return s;
    }
    return Status::ok();
  }
  if (type == "Split") {
    if (string_or(e, "behavior", "") != "Isolated" || bool_or(e, "invert", false)) {
      return Status::error("Split pre-tokenizer other than behavior Isolated, invert false is not supported");
    }
    std::string_view pattern;
    std::string escaped;
    if (e["pattern"]["Regex"].get(pattern) != simdjson::SUCCESS) {
      if (e["pattern"]["String"].get(pattern) != simdjson::SUCCESS) return Status::error("Split without a pattern");
      escaped = "\\Q" + std::string(pattern) + "\\E";  // the literal, as a regex
      pattern = escaped;
    }
    auto regex = RegexSplitter::compile(pattern);
    if (!regex) return regex.status().with_context("Split pre-tokenizer");
    out.push_back(PreStep{std::move(regex).value(), false, false});
    return Status::ok();
  }
  if (type == "ByteLevel") {
    PreStep step;
    step.byte_level = true;
    step.add_prefix_space = bool_or(e, "add_prefix_space", false);
    if (bool_or(e, "use_regex", true)) {
      auto regex = RegexSplitter::compile(kGpt2Pattern);
      if (!regex) return regex.status();
      step.split = std::move(regex).value();
    }
    out.push_back(std::move(step));
    return Status::ok();
  }
  return Status::error("pre_tokenizer '" + std::string(type) + "' is not supported");
}

Result<BpeModel> read_bpe(element model) {
  if (string_or(model, "type", "BPE") != "BPE") {
    return Status::error("model type '" + std::string(string_or(model, "type", "")) + "' is not supported (BPE only)");
  }
  if (!is_null_or_missing(model, "dropout") || bool_or(model, "byte_fallback", false) ||
      !string_or(model, "continuing_subword_prefix", "").empty() ||
      !string_or(model, "end_of_word_suffix", "").empty()) {
    return Status::error("BPE with dropout, byte fallback or subword affixes is not supported");
  }
  object vocab_json;
  if (model["vocab"].get(vocab_json) != simdjson::SUCCESS) return Status::error("BPE model without a vocab");
  std::unordered_map<std::string, TokenId> vocab;
  vocab.reserve(vocab_json.size());
  for (auto field : vocab_json) {
    std::int64_t id = 0;
    if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) {
      return Status::error("vocab entry '" + std::string(field.key) + "' has no valid id");
    }
    vocab.emplace(std::string(field.key), static_cast<TokenId>(id));
  }
  array merges_json;
  std::vector<std::pair<std::string, std::string>> merges;
  if (model["merges"].get(merges_json) == simdjson::SUCCESS) {
    merges.reserve(merges_json.size());
    for (element merge : merges_json) {
      std::string_view text, left, right;
      array pair;
      if (merge.get(pair) == simdjson::SUCCESS && pair.size() == 2 &&
          pair.at(0).get(left) == simdjson::SUCCESS && pair.at(1).get(right) == simdjson::SUCCESS) {
        merges.emplace_back(left, right);
      } else if (merge.get(text) == simdjson::SUCCESS && text.find(' ') != std::string_view::npos) {
        const auto space = text.find(' ');  // the older "a b" form
        merges.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else {
        return Status::error("a merge is neither [\"a\", \"b\"] nor \"a b\"");
      }
    }
  }
  return BpeModel::build(std::move(vocab), merges, bool_or(model, "ignore_merges", false));
}

}  // namespace

struct Tokenizer::Impl {
  std::string sha256;
  std::vector<NormalForm> normal_forms;
  std::vector<PreStep> pre_steps;
  BpeModel bpe;
  detail::AddedTokenMatcher raw_matcher{{}};         // added tokens with normalized: false
  detail::AddedTokenMatcher normalized_matcher{{}};  // added tokens with normalized: true
  std::unordered_map<TokenId, AddedToken> added_by_id;
  std::unordered_map<std::string, TokenId> added_by_content;
  TokenId size = 0;

  explicit Impl(BpeModel model) : bpe(std::move(model)) {}
  Status encode_text(std::string_view text, std::vector<TokenId>& out) const;
};

Status Tokenizer::Impl::encode_text(std::string_view text, std::vector<TokenId>& out) const {
  // Each pre-tokeniser step maps every piece to its sub-pieces; strings are owned because a
  // ByteLevel prefix space makes new text.
  std::vector<std::string> pieces{std::string(text)};
  for (const PreStep& step : pre_steps) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.add_prefix_space && !piece.starts_with(' ')) piece.insert(0, 1, ' ');
      if (!step.split) {
        next.push_back(std::move(piece));
        continue;
      }
      std::vector<std::string_view> parts;
      if (Status s = step.split->split(piece, parts); !s) return s;
      for (const auto part : parts) next.emplace_back(part);
    }
    pieces = std::move(next);
  }
  for (const std::string& piece : pieces) bpe.encode_word(piece, out);
  return Status::ok();
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code ignored;
  const std::string file = std::filesystem::is_directory(path, ignored) ? path + "/tokenizer.json" : path;
  std::string bytes;
  if (!read_whole_file(file, bytes)) return Status::error("cannot read " + cudaagent::quoted(file));
  return from_json(bytes, file);
}

Result<Tokenizer> Tokenizer::from_json(std::string_view json, const std::string& origin) {
  const auto fail = [&](const Status& s) { return s.with_context(cudaagent::quoted(origin)); };
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(json.data(), json.size()).get(root); error) {
    return fail(Status::error(std::string("not JSON: ") + simdjson::error_message(error)));
  }
  element model_json;
  if (root["model"].get(model_json) != simdjson::SUCCESS) return fail(Status::error("no model"));
  auto bpe = read_bpe(model_json);
  if (!bpe) return fail(bpe.status());
  auto impl = std::make_unique<Impl>(std::move(bpe).value());
  impl->sha256 = sha256_hex(json);

  element part;
  if (root["normalizer"].get(part) == simdjson::SUCCESS) {
    if (Status s = read_normalizer(part, impl->normal_forms); !s) return fail(s);
  }
  if (root["pre_tokenizer"].get(part) == simdjson::SUCCESS && !part.is_null()) {
    if (Status s = read_pre_tokenizer(part, impl->pre_steps); !s) return fail(s);
  }
  int byte_level_steps = 0;
  for (const PreStep& step : impl->pre_steps) byte_level_steps += step.byte_level ? 1 : 0;
  if (byte_level_steps != 1 || !impl->pre_steps.back().byte_level) {
    return fail(Status::error("the pre_tokenizer must end with one ByteLevel step (a byte-level BPE)"));
  }
  if (root["decoder"].get(part) != simdjson::SUCCESS || string_or(part, "type", "") != "ByteLevel") {
    return fail(Status::error("the decoder must be ByteLevel"));
  }

  TokenId max_id = -1;
  for (const auto& [text, id] : impl->bpe.vocab()) max_id = std::max(max_id, id);
  std::vector<AddedToken> raw, normalized;
  array added;
  if (root["added_tokens"].get(added) == simdjson::SUCCESS) {
    for (element item : added) {
      AddedToken token;
      std::int64_t id = -1;
      std::string_view content;
      if (item["id"].get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX ||
          item["content"].get(content) != simdjson::SUCCESS || content.empty()) {
        return fail(Status::error("an added token without id or content"));
      }
      token.id = static_cast<TokenId>(id);
      token.content = content;
      token.single_word = bool_or(item, "single_word", false);
      token.lstrip = bool_or(item, "lstrip", false);
      token.rstrip = bool_or(item, "rstrip", false);
      token.special = bool_or(item, "special", false);
      token.normalized = bool_or(item, "normalized", !token.special);
      max_id = std::max(max_id, token.id);
      impl->added_by_content[token.content] = token.id;
      impl->added_by_id[token.id] = token;
      (token.normalized ? normalized : raw).push_back(std::move(token));
    }
  }
  impl->raw_matcher = detail::AddedTokenMatcher(std::move(raw));
  impl->normalized_matcher = detail::AddedTokenMatcher(std::move(normalized));
  impl->size = max_id + 1;
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text) const {
  if (!detail::is_valid_utf8(text)) return Status::error("text is not valid UTF-8");
  std::vector<TokenId> ids;
  std::vector<detail::Segment> raw_segments, normalized_segments;
  impl_->raw_matcher.split(text, raw_segments);
  for (const auto& segment : raw_segments) {
    if (segment.added >= 0) {
      ids.push_back(segment.added);
      continue;
    }
    std::string normal(segment.text);
    for (const NormalForm form : impl_->normal_forms) {
      auto mapped = detail::normalize(normal, form);
      if (!mapped) return mapped.status();
      normal = std::move(mapped).value();
    }
    normalized_segments.clear();
    impl_->normalized_matcher.split(normal, normalized_segments);
    for (const auto& piece : normalized_segments) {
      if (piece.added >= 0) {
        ids.push_back(piece.added);
      } else if (Status s = impl_->encode_text(piece.text, ids); !s) {
        return s;
      }
    }
  }
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const TokenId> ids, bool skip_special) const {
  std::string out;
  for (const TokenId id : ids) {
    const std::string* text = nullptr;
    if (const auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) {
      if (skip_special && it->second.special) continue;
      text = &it->second.content;
    } else {
      text = impl_->bpe.token(id);
    }
    if (text == nullptr) continue;
    // The ByteLevel decoder: a token whose every character is in the byte table stands for those
    // bytes; any other token stands for its own text.
    if (!detail::byte_level_decode(*text, out)) out += *text;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  return utf8_lossy(decode_bytes(ids, skip_special));
}

std::optional<TokenId> Tokenizer::token_id(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(std::string(token)); it != impl_->added_by_content.end()) {
    return it->second;
  }
  if (const auto it = impl_->bpe.vocab().find(std::string(token)); it != impl_->bpe.vocab().end()) {
    return it->second;
  }
  return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
  const auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && it->second.special;
}

TokenId Tokenizer::size() const { return impl_->size; }
const std::string& Tokenizer::sha256() const { return impl_->sha256; }

}  // namespace cudaagent::train
