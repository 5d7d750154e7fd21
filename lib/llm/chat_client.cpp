// The chat client: HttpClient's retrying POST, then the reply's HTTP status sorted into the failure
// kinds an episode acts on.
#include "cudaagent/llm/chat_client.h"

#include "cudaagent/llm/token_prompt.h"

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
    : endpoint_(std::move(endpoint)),
      url_(chat_completions_url(endpoint_.url)),
      base_url_(server_base_url(endpoint_.url)) {}

Result<HttpResponse> ChatClient::post(const std::string& url, std::string body, const std::atomic<int>& stop,
                                      const std::function<void(const std::string&)>& on_retry, int& tries,
                                      ChatFailure& failure) {
  HttpRequest http;
  http.url = url;
  http.body = std::move(body);
  http.headers = {"Content-Type: application/json"};
  if (!endpoint_.api_key.empty()) http.headers.push_back("Authorization: Bearer " + endpoint_.api_key);
  http.timeout_seconds = endpoint_.timeout_seconds;
  http.connect_timeout_seconds = endpoint_.connect_timeout_seconds;
  int retries_seen = 0;
  auto response = http_.post_with_retries(http, endpoint_.retry, stop, [&](const std::string& line) {
    ++retries_seen;
    if (on_retry) on_retry(line);
  });
  tries += 1 + retries_seen;
  if (stop.load() != 0) {
    failure = ChatFailure::kStopped;
    return Status::error("stopped by a signal");
  }
  if (!response) failure = ChatFailure::kTransport;
  return response;
}

// Sorts a non-2xx answer into a failure kind; ok for 2xx.
Status ChatClient::check(const std::string& url, const HttpResponse& r, ChatFailure& failure) const {
  if (r.status >= 200 && r.status < 300) return Status::ok();
  if (r.status == 400 && is_context_overflow(r.body)) {
    failure = ChatFailure::kContextOverflow;
    return Status::error("HTTP 400: " + first_line(r.body));
  }
  const bool retryable = r.status == 408 || r.status == 429 || r.status >= 500;
  failure = retryable ? ChatFailure::kTransport : ChatFailure::kRejected;
  return Status::error("POST '" + url + "': HTTP " + std::to_string(r.status) + ": " + first_line(r.body));
}

Result<ChatOutcome> ChatClient::complete(const ChatRequest& request, const std::atomic<int>& stop,
                                         const std::function<void(const std::string&)>& on_retry,
                                         ChatFailure* failure) {
  const auto started = std::chrono::steady_clock::now();
  ChatFailure kind = ChatFailure::kNone;
  auto fail = [&](Status status) -> Result<ChatOutcome> {
    if (failure != nullptr) *failure = kind;
    return status;
  };
  ChatRequest sent = request;
  int tries = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!token_fields_accepted_) sent.tokens = TokenOptions{false, false};
    auto response = post(url_, chat_request_body(sent), stop, on_retry, tries, kind);
    if (!response) return fail(response.status());
    const HttpResponse& r = response.value();
    if (r.status == 400 && (sent.tokens.logprobs || sent.tokens.token_ids) && rejects_token_fields(r.body)) {
      token_fields_accepted_ = false;  // ask again without them, and never again with them
      if (on_retry) {
        on_retry("the server refused vLLM's token fields (" + first_line(r.body) +
                 "); asking without them: trajectories will be text-only");
      }
      continue;
    }
    if (auto status = check(url_, r, kind); !status) return fail(status);
    auto reply = parse_chat_reply(r.body);
    if (!reply) {
      kind = ChatFailure::kBadReply;
      return fail(reply.status());
    }
    ChatOutcome outcome{std::move(reply).value(), 0, tries};
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (failure != nullptr) *failure = ChatFailure::kNone;
    return outcome;
  }
  kind = ChatFailure::kRejected;
  return fail(Status::error("the server refused the request twice"));
}

Result<ChatOutcome> ChatClient::complete_tokens(const CompletionRequest& request, const std::atomic<int>& stop,
                                                const std::function<void(const std::string&)>& on_retry,
                                                ChatFailure* failure) {
  const auto started = std::chrono::steady_clock::now();
  ChatFailure kind = ChatFailure::kNone;
  int tries = 0;
  const std::string url = base_url_ + "/v1/completions";
  auto response = post(url, completion_request_body(request), stop, on_retry, tries, kind);
  Status status = response ? check(url, response.value(), kind) : response.status();
  Result<ChatReply> reply = status ? parse_completion_reply(response.value().body) : Result<ChatReply>(status);
  if (status && !reply) kind = ChatFailure::kBadReply;
  if (failure != nullptr) *failure = reply ? ChatFailure::kNone : kind;
  if (!reply) return reply.status();
  ChatOutcome outcome{std::move(reply).value(), 0, tries};
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return outcome;
}

Result<std::vector<std::int32_t>> ChatClient::tokenize(const std::string& model,
                                                       const std::vector<ChatMessage>& messages,
                                                       const std::vector<ToolDefinition>& tools,
                                                       bool add_generation_prompt, const std::atomic<int>& stop,
                                                       ChatFailure* failure) {
  ChatFailure kind = ChatFailure::kNone;
  int tries = 0;
  const std::string url = base_url_ + "/tokenize";
  auto response = post(url, tokenize_request_body(model, messages, tools, add_generation_prompt), stop, {},
                       tries, kind);
  Status status = response ? check(url, response.value(), kind) : response.status();
  Result<std::vector<std::int32_t>> ids =
      status ? parse_tokenize_reply(response.value().body) : Result<std::vector<std::int32_t>>(status);
  if (status && !ids) kind = ChatFailure::kBadReply;
  if (failure != nullptr) *failure = ids ? ChatFailure::kNone : kind;
  return ids;
}

}  // namespace cudaagent::llm
