// AstTokenizer: one long-lived Python process (share/harness/ast_features.py) that turns module
// source text into normalised AST tokens, one request and one answer per line over a socket. Key
// design choice: Python's own `ast` parses the tasks (the grammar is exactly the one that will run
// them, and parsing never executes them), and one process serves the whole run, so start-up is
// paid once, not per task.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

// share/harness/ast_features.py's TOKENS_VERSION: the helper must announce exactly this.
inline constexpr std::string_view kAstTokensVersion = "ast-tokens-1";

// What the helper made of one source text, or why the text is not a module. Both token lists are
// space-separated; they are empty for a module of nothing but imports, docstrings and comments.
struct ParsedSource {
  bool parsed = false;
  std::string tokens;  // the whole module, normalised, in preorder
  std::string ops;     // the API and attribute names the model uses (sorted)
  std::string error;   // when not parsed: "SyntaxError: invalid syntax (line 3)", "ValueError: ..."
};

class AstTokenizer {
 public:
  // Starts `python` (a path, or a name looked up in $PATH) in isolated mode (-I) on `script`,
  // with the caller's environment (it is the caller's own interpreter, and parsing runs nothing of
  // the tasks), and waits for its version line. A Status when it does not announce itself within
  // max(timeout_seconds, 30 s), dies, or announces another version than kAstTokensVersion.
  // `timeout_seconds` is also the limit on each parse().
  static Result<AstTokenizer> start(const std::string& python, const std::string& script,
                                    double timeout_seconds = 60.0);
  AstTokenizer(AstTokenizer&&) noexcept;
  AstTokenizer& operator=(AstTokenizer&&) noexcept;
  // Kills the helper's process group and reaps it; never throws.
  ~AstTokenizer();

  // Sends `source` and waits for the answer (at most the timeout given to start). A failed Status
  // when the helper did not answer properly (died, timed out, answered garbage); the helper is
  // then gone and every later call fails too: start a new one. Not thread-safe.
  Result<ParsedSource> parse(std::string_view source);

  const std::string& python() const;

 private:
  struct State;
  explicit AstTokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Parses `sources` on `helpers` helper processes at once (each AstTokenizer::start(python,
// script), each fed by its own thread) and returns the answers in the order of `sources`: the
// ParsedSource, or a Status when the helper failed on that source (that helper is then replaced).
// An entry stays empty (nullopt) when no helper was left to ask it (a replacement failed to start)
// or `stop` became non-zero; callers parse those one by one. `restarts` counts the failures.
std::vector<std::optional<Result<ParsedSource>>> parse_sources(
    const std::string& python, const std::string& script,
    const std::vector<std::string_view>& sources, int helpers, std::uint64_t& restarts,
    const std::atomic<int>* stop = nullptr);

// Tries the interpreters of python_candidates(requested) (torch_env.h: `requested`, else
// $CUDAAGENT_PYTHON, every python3 on PATH, /usr/bin/python3) with share_dir()'s
// harness/ast_features.py and returns the first that starts; the reasons of all when none does.
Result<AstTokenizer> start_ast_tokenizer(const std::string& requested);

}  // namespace cudaagent
