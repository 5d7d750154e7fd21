// Normalisation, regex splitting and added-token matching for the tokenizer. PCRE2's JIT is used
// when the library has it (with a private JIT stack per call, so long whitespace runs cannot
// overflow the default 32 KiB one); the interpreter otherwise.
#include "text_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "utf8.h"

namespace cudaagent::train::detail {
namespace {

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c == '_') return true;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) ||
         (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO);
}

// The code point ending at text[end) (text is valid UTF-8, end > 0) and its start.
std::size_t previous_start(std::string_view text, std::size_t end) {
  std::size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

char32_t code_point_at(std::string_view text, std::size_t i) {
  const std::size_t n = utf8_sequence_length(text, i);
  return n == 0 ? 0xFFFD : utf8_decode(text, i, n);
}

}  // namespace

Result<std::string> normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  if (text.empty()) return std::string();
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                   static_cast<utf8proc_option_t>(options));
  if (length < 0) return Status::error(std::string("utf8proc: ") + utf8proc_errmsg(length));
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
  std::free(mapped);
  return out;
}

Result<RegexSplitter> RegexSplitter::compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    return Status::error("regex does not compile at offset " + std::to_string(offset) + ": " +
                         pcre2_message(error));
  }
  RegexSplitter splitter;
  splitter.code_ = code;
  splitter.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return splitter;
}

RegexSplitter::RegexSplitter(RegexSplitter&& other) noexcept
    : code_(std::exchange(other.code_, nullptr)), jit_(other.jit_) {}

RegexSplitter& RegexSplitter::operator=(RegexSplitter&& other) noexcept {
  if (this != &other) {
    if (code_ != nullptr) pcre2_code_free(as_code(code_));
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
  }
  return *this;
}

RegexSplitter::~RegexSplitter() {
  if (code_ != nullptr) pcre2_code_free(as_code(code_));
}

Status RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  using MatchData = std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)>;
  using Context = std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)>;
  using JitStack = std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)>;
  MatchData match(pcre2_match_data_create_from_pattern(as_code(code_), nullptr),
                  &pcre2_match_data_free);
  Context context(pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  JitStack stack(jit_ ? pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr) : nullptr,
                 &pcre2_jit_stack_free);
  if (!match || !context || (jit_ && !stack)) return Status::error("PCRE2: out of memory");
  if (stack) pcre2_jit_stack_assign(context.get(), nullptr, stack.get());

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t gap_start = 0, position = 0;
  while (position <= text.size()) {
    const int rc = pcre2_match(as_code(code_), subject, text.size(), position, PCRE2_NO_UTF_CHECK,
                               match.get(), context.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return Status::error("PCRE2: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const std::size_t start = ovector[0], end = ovector[1];
    if (end == start) {  // an empty match splits nothing; step over one character
      if (start >= text.size()) break;
      const std::size_t n = utf8_sequence_length(text, start);
      position = start + (n == 0 ? 1 : n);
      continue;
    }
    if (start > gap_start) out.push_back(text.substr(gap_start, start - gap_start));
    out.push_back(text.substr(start, end - start));
    gap_start = position = end;
  }
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
  return Status::ok();
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), by_first_byte_(256) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::size_t segment_start = 0;  // start of the text not yet emitted
  std::size_t position = 0;       // where the next search starts
  while (position < text.size()) {
    // The longest token that starts at the leftmost position where any token starts.
    const AddedToken* found = nullptr;
    std::size_t start = position;
    for (; start < text.size() && found == nullptr; ++start) {
      for (const std::size_t index : by_first_byte_[static_cast<unsigned char>(text[start])]) {
        if (text.substr(start).starts_with(tokens_[index].content)) {
          found = &tokens_[index];
          break;
        }
      }
      if (found != nullptr) break;
    }
    if (found == nullptr) break;
    std::size_t stop = start + found->content.size();
    position = stop;
    if (found->single_word) {
      const bool word_before = start > 0 && is_word_char(code_point_at(text, previous_start(text, start)));
      const bool word_after = stop < text.size() && is_word_char(code_point_at(text, stop));
      if (word_before || word_after) continue;  // not a word of its own: stays text
    }
    if (found->lstrip) {
      while (start > segment_start) {
        const std::size_t prev = previous_start(text, start);
        if (!is_whitespace(code_point_at(text, prev))) break;
        start = prev;
      }
    }
    if (found->rstrip) {
      while (stop < text.size()) {
        const char32_t c = code_point_at(text, stop);
        if (!is_whitespace(c)) break;
        stop += utf8_sequence_length(text, stop);
      }
    }
    if (start > segment_start) out.push_back({text.substr(segment_start, start - segment_start), -1});
    out.push_back({text.substr(start, stop - start), found->id});
    segment_start = stop;
    position = std::max(position, stop);
  }
  if (segment_start < text.size()) out.push_back({text.substr(segment_start), -1});
}

}  // namespace cudaagent::train::detail
