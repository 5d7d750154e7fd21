// HTTP POST for talking to model servers (OpenAI-compatible endpoints), on libcurl. Timeouts,
// retries with exponential backoff on the failures that retrying can fix (no connection, timeouts,
// HTTP 408/429/5xx), and messages that say what failed: "POST 'http://h/v1/chat/completions':
// HTTP 500 after 4 tries: upstream down".
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/base/version.h"

namespace cudaagent {

// The libcurl this process runs with, for --version.
VersionList llm_versions();

struct HttpRequest {
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  double timeout_seconds = 120;      // the whole transfer
  double connect_timeout_seconds = 10;
  // When set and non-zero (a signal number), a transfer under way is abandoned within ~0.1 s.
  const std::atomic<int>* stop = nullptr;
};

struct HttpResponse {
  long status = 0;  // HTTP status code
  std::string body;
};

struct RetryPolicy {
  int retries = 3;               // tries after the first
  double backoff_seconds = 1.0;  // wait before the first retry; doubles each time
  double max_backoff_seconds = 30.0;
};

// One libcurl easy handle (with its connection cache) for a sequence of requests. Construct one per
// thread; the process must have called curl_global_init first (HttpGlobal does).
class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One POST. Any HTTP status is a response; a Status when no response came (refused, timed out,
  // bad URL, stopped), saying why.
  Result<HttpResponse> post(const HttpRequest& request);

  // POST with retries: a transport failure or HTTP 408, 429 or 5xx is tried again after the
  // policy's backoff; other statuses are returned as they are. `stop` (a signal number, 0 for
  // none) ends the transfer and the waiting early. `on_retry` hears each failed try, for logging.
  Result<HttpResponse> post_with_retries(const HttpRequest& request, const RetryPolicy& policy,
                                         const std::atomic<int>& stop,
                                         const std::function<void(const std::string&)>& on_retry);

 private:
  void* curl_;  // CURL*, opaque so callers need no libcurl headers
};

// curl_global_init / curl_global_cleanup for the lifetime of the object. Create one in a program
// before any HttpClient, while it has one thread.
class HttpGlobal {
 public:
  HttpGlobal();
  ~HttpGlobal();
  HttpGlobal(const HttpGlobal&) = delete;
  HttpGlobal& operator=(const HttpGlobal&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

}  // namespace cudaagent
