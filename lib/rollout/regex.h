// A PCRE2 pattern for the tools (Grep, BashOutput's filter): UTF-8 with invalid bytes tolerated,
// and a match limit, so a pathological pattern fails a match instead of stalling the episode.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"

namespace cudaagent::rollout::detail {

class Regex {
 public:
  // A Status with PCRE2's message and the offset when `pattern` does not compile.
  static Result<Regex> compile(const std::string& pattern, bool case_insensitive) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    const std::uint32_t options =
        PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (case_insensitive ? PCRE2_CASELESS : 0);
    pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         options, &code, &offset, nullptr);
    if (compiled == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(code, message, sizeof message);
      return Status::error("the pattern is not a valid regular expression at offset " +
                           std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
    }
    Regex regex;
    regex.code_.reset(compiled);
    regex.data_.reset(pcre2_match_data_create_from_pattern(compiled, nullptr));
    regex.context_.reset(pcre2_match_context_create(nullptr));
    pcre2_set_match_limit(regex.context_.get(), 1000000);
    pcre2_set_depth_limit(regex.context_.get(), 10000);
    return regex;
  }

  enum class Match { kNo, kYes, kTooExpensive };
  Match search(std::string_view text) const {
    const int rc = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0,
                               data_.get(), context_.get());
    if (rc >= 0) return Match::kYes;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) return Match::kTooExpensive;
    return Match::kNo;
  }

 private:
  Regex() = default;
  struct FreeCode {
    void operator()(pcre2_code* p) const { pcre2_code_free(p); }
  };
  struct FreeData {
    void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
  };
  struct FreeContext {
    void operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
  };
  std::unique_ptr<pcre2_code, FreeCode> code_;
  std::unique_ptr<pcre2_match_data, FreeData> data_;
  std::unique_ptr<pcre2_match_context, FreeContext> context_;
};

}  // namespace cudaagent::rollout::detail
