// The chat client: HttpClient's retrying POST, then the reply's HTTP status sorted into the failure
// kinds an episode acts on.
#include "cudaagent/llm/chat_client.h"

#include <chrono>

namespace cudaagent::llm {
namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string first_line(std::string_view body) {
  std::string line(body.substr(0, std::min<std::size_t>(body.find('\n'), 300)));
  return line.empty() ? "(empty body)" : line;
}

}  // namespace

bool is_context_overflow(std::string_view body) {
  return contains(body, "maximum context length") || contains(body, "context_length_exceeded") ||
         contains(body, "exceeds the available context size") || contains(body, "context length");
}

bool rejects_token_fields(std::string_view body) {
  const bool names_field = contains(body, "return_token_ids") ||
                           contains(body, "return_tokens_as_token_ids") || contains(body, "logprobs");
  const bool says_unknown = contains(body, "xtra") || contains(body, "nrecognized") ||
                            contains(body, "not supported") || contains(body, "unknown") ||
                            contains(body, "not permitted");
  return names_field && says_unknown;
}

ChatClient::ChatClient(ChatEndpoint endpoint)
    : endpoint_(std::move(endpoint)), url_(chat_completions_url(endpoint_.url)) {}

Result<ChatOutcome> ChatClient::complete(const ChatRequest& request, const std::atomic<int>& stop,
                                         const std::function<void(const std::string&)>& on_retry,
                                         ChatFailure* failure) {
  const auto started = std::chrono::steady_clock::now();
  auto fail = [&](ChatFailure kind, std::string message) -> Result<ChatOutcome> {
    if (failure != nullptr) *failure = kind;
    return Status::error(std::move(message));
  };
  HttpRequest http;
  http.url = url_;
  http.headers = {"Content-Type: application/json"};
  if (!endpoint_.api_key.empty()) http.headers.push_back("Authorization: Bearer " + endpoint_.api_key);
  http.timeout_seconds = endpoint_.timeout_seconds;
  http.connect_timeout_seconds = endpoint_.connect_timeout_seconds;
  ChatRequest sent = request;
  int tries = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!token_fields_accepted_) sent.tokens = TokenOptions{false, false};
    http.body = chat_request_body(sent);
    int retries_seen = 0;
    auto response = http_.post_with_retries(http, endpoint_.retry, stop, [&](const std::string& line) {
      ++retries_seen;
      if (on_retry) on_retry(line);
    });
    tries += 1 + retries_seen;
    if (stop.load() != 0) return fail(ChatFailure::kStopped, "stopped by a signal");
    if (!response) return fail(ChatFailure::kTransport, response.status().message());
    const HttpResponse& r = response.value();
    if (r.status == 400 && (sent.tokens.logprobs || sent.tokens.token_ids) && rejects_token_fields(r.body)) {
      token_fields_accepted_ = false;  // ask again without them, and never again with them
      if (on_retry)
        on_retry("the server refused vLLM's token fields (" + first_line(r.body) +
                 "); asking without them: trajectories will be text-only");
      continue;
    }
    if (r.status == 400 && is_context_overflow(r.body)) {
      return fail(ChatFailure::kContextOverflow, "HTTP 400: " + first_line(r.body));
    }
    if (r.status < 200 || r.status >= 300) {
      const bool retryable = r.status == 408 || r.status == 429 || r.status >= 500;
      return fail(retryable ? ChatFailure::kTransport : ChatFailure::kRejected,
                  "POST '" + url_ + "': HTTP " + std::to_string(r.status) + ": " + first_line(r.body));
    }
    auto reply = parse_chat_reply(r.body);
    if (!reply) return fail(ChatFailure::kBadReply, reply.status().message());
    ChatOutcome outcome{std::move(reply).value(), 0, tries};
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (failure != nullptr) *failure = ChatFailure::kNone;
    return outcome;
  }
  return fail(ChatFailure::kRejected, "the server refused the request twice");
}

}  // namespace cudaagent::llm
