// Text for people, made safe to print. Candidate bytes (file names, compiler diagnostics, the last
// line of a candidate's stderr, kernel names) reach terminals through messages, --brief text and
// progress lines; a raw escape sequence there can rewrite the screen, forge a verdict line or a
// hyperlink, or hide text. Key design choice: escape on output, once, in one function, keeping
// printable UTF-8 (names in any script stay readable) and making everything else visible.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cudaagent {

// Default cap of printable_text: a message is read by a person, never parsed.
inline constexpr std::size_t kPrintableTextBytes = 4096;

// Returns `bytes` with everything a terminal would interpret made visible: C0 controls and DEL as
// \n, \r, \t, \e or \xNN; bytes of invalid or overlong UTF-8, surrogates and code points above
// U+10FFFF as \xNN; C1 controls (U+0080..U+009F), the bidirectional controls (U+061C, U+200E,
// U+200F, U+202A..U+202E, U+2066..U+2069), the zero-width characters U+200B..U+200D, U+2028,
// U+2029 and U+FEFF as \u{XXXX}. Printable ASCII and every other valid UTF-8 character are kept;
// so is the backslash itself, which makes the function idempotent (escaping escaped text changes
// nothing) at the price of not being reversible: this is for reading, not parsing.
//
// At most `max_bytes` of kept or escaped text are returned, cut between characters, followed by
// "... (N more bytes)" when something was cut. Thread-safe; allocates only the result.
std::string printable_text(std::string_view bytes, std::size_t max_bytes = kPrintableTextBytes);

}  // namespace cudaagent
