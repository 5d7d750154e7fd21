// libcurl behind a small interface. Signals are left alone (CURLOPT_NOSIGNAL), so a stop request
// from the tool's handler never lands inside libcurl; the retry wait polls the stop flag instead.
#include "cudaagent/llm/http.h"

#include <curl/curl.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

namespace cudaagent {

VersionList llm_versions() {
  return {{"libcurl", curl_version_info(CURLVERSION_NOW)->version}};
}

namespace {

constexpr std::size_t kMaxResponseBytes = std::size_t{64} << 20;

struct Sink {
  std::string* body;
  bool overflow = false;
};

extern "C" std::size_t collect(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * count;
  if (sink->body->size() + bytes > kMaxResponseBytes) {
    sink->overflow = true;
    return 0;  // aborts the transfer
  }
  sink->body->append(data, bytes);
  return bytes;
}

// libcurl calls this often during a transfer (at least once a second, and on every chunk);
// a non-zero return aborts the transfer.
extern "C" int check_stop(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* stop = static_cast<const std::atomic<int>*>(user);
  return stop != nullptr && stop->load() != 0 ? 1 : 0;
}

bool retryable(long status) { return status == 408 || status == 429 || status >= 500; }

std::string first_line(const std::string& body) {
  std::string line = body.substr(0, std::min<std::size_t>(body.find('\n'), 200));
  return line.empty() ? "(empty body)" : line;
}

}  // namespace

HttpGlobal::HttpGlobal() : ok_(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK) {}
HttpGlobal::~HttpGlobal() {
  if (ok_) curl_global_cleanup();
}

HttpClient::HttpClient() : curl_(curl_easy_init()) {}
HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpResponse> HttpClient::post(const HttpRequest& request) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Status::error("cannot start libcurl");
  curl_easy_reset(curl);
  HttpResponse response;
  Sink sink{&response.body};
  curl_slist* headers = nullptr;
  for (const std::string& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  if (request.stop != nullptr) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, check_stop);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, request.stop);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_seconds * 1000));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout_seconds * 1000));
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) {
    if (sink.overflow) return Status::error("response larger than 64 MiB");
    if (code == CURLE_ABORTED_BY_CALLBACK) return Status::error("stopped by a signal");
    return Status::error(error[0] != 0 ? std::string(error) : std::string(curl_easy_strerror(code)));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

Result<HttpResponse> HttpClient::post_with_retries(
    const HttpRequest& request, const RetryPolicy& policy, const std::atomic<int>& stop,
    const std::function<void(const std::string&)>& on_retry) {
  std::string failure;
  const int tries = 1 + std::max(0, policy.retries);
  HttpRequest stoppable = request;
  stoppable.stop = &stop;
  for (int attempt = 0; attempt < tries; ++attempt) {
    if (attempt > 0) {
      const double wait = std::min(policy.max_backoff_seconds,
                                   policy.backoff_seconds * std::pow(2.0, attempt - 1));
      if (on_retry) on_retry(failure + "; retrying in " + std::to_string(wait).substr(0, 4) + " s");
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
      while (std::chrono::steady_clock::now() < until) {
        if (stop.load() != 0) return Status::error("POST " + request.url + ": stopped by a signal");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    auto response = post(stoppable);
    if (response && !retryable(response.value().status)) return response;
    if (stop.load() != 0) return Status::error("POST " + request.url + ": stopped by a signal");
    failure = response ? "HTTP " + std::to_string(response.value().status) + ": " +
                             first_line(response.value().body)
                       : response.status().message();
  }
  return Status::error("POST '" + request.url + "': " + failure + " (after " + std::to_string(tries) +
                       (tries == 1 ? " try)" : " tries)"));
}

}  // namespace cudaagent
