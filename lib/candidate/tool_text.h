// Reading the text that nm and objdump print (object_policy.cpp, object_lines.cpp): the two
// parsers walk it line by line with the same helpers.
#pragma once

#include <string_view>

namespace cudaagent::tool_text {

inline bool starts(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Calls fn(line) for each line of `text`, without its newline (a last line without one too).
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    fn(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace cudaagent::tool_text
