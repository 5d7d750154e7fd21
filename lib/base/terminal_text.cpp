// A hand-written UTF-8 decoder: the rules are few (RFC 3629's well-formed sequences), and each
// decision (keep, \xNN, \u{...}) depends on the code point, which a library would only give back.
#include "cudaagent/base/terminal_text.h"

#include <cstdint>
#include <cstdio>

namespace cudaagent {
namespace {

// The length of the well-formed UTF-8 sequence starting at bytes[i] and its code point, or 0 when
// it is not one (a stray continuation byte, a truncated or overlong sequence, a surrogate, a code
// point above U+10FFFF).
std::size_t decode_utf8(std::string_view bytes, std::size_t i, char32_t& code) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(bytes[i + k]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  char32_t minimum = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1Fu, minimum = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0Fu, minimum = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code = lead & 0x07u, minimum = 0x10000;
  } else {
    return 0;
  }
  if (i + length > bytes.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0u) != 0x80u) return 0;
    code = (code << 6) | (byte(k) & 0x3Fu);
  }
  if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// Valid characters a terminal would act on rather than show.
bool is_hidden_character(char32_t code) {
  return (code >= 0x80 && code <= 0x9F) || code == 0x061C || (code >= 0x200B && code <= 0x200F) ||
         (code >= 0x2028 && code <= 0x202E) || (code >= 0x2066 && code <= 0x2069) || code == 0xFEFF;
}

std::string escaped_byte(unsigned char c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case 0x1B:
      return "\\e";
    default: {
      char text[8];
      std::snprintf(text, sizeof text, "\\x%02x", c);
      return text;
    }
  }
}

}  // namespace

std::string printable_text(std::string_view bytes, std::size_t max_bytes) {
  std::string out;
  out.reserve(bytes.size() < max_bytes ? bytes.size() : max_bytes);
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    std::string piece;
    std::size_t used = 1;
    char32_t code = 0;
    if (c >= 0x20 && c < 0x7F) {
      piece.assign(1, static_cast<char>(c));
    } else if (c < 0x80) {
      piece = escaped_byte(c);
    } else if (const std::size_t length = decode_utf8(bytes, i, code); length == 0) {
      piece = escaped_byte(c);
    } else if (is_hidden_character(code)) {
      char text[16];
      std::snprintf(text, sizeof text, "\\u{%04X}", static_cast<unsigned>(code));
      piece = text;
      used = length;
    } else {
      piece.assign(bytes.substr(i, length));
      used = length;
    }
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += used;
  }
  if (i < bytes.size()) out += "... (" + std::to_string(bytes.size() - i) + " more bytes)";
  return out;
}

}  // namespace cudaagent
