// Small UTF-8 helpers shared by the tokenizer and the chat code. Internal to lib/train.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cudaagent::train::detail {

// Length (1-4) of the well-formed UTF-8 sequence at text[i], or 0 when it is not one (overlong
// forms, surrogates and code points above U+10FFFF are not).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

// The code point of the well-formed sequence of `length` bytes at text[i].
char32_t utf8_decode(std::string_view text, std::size_t i, std::size_t length);

void utf8_append(std::string& out, char32_t code_point);

bool is_valid_utf8(std::string_view text);

}  // namespace cudaagent::train::detail
