// HTTP POST against a canned server on a loopback socket: statuses come back as responses, 5xx
// is retried and 4xx is not, a closed port is a clear error after the retries, a stop request
// ends the backoff early.
#include "cudaagent/llm/http.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace cudaagent;

namespace {

// Answers one connection per canned reply, in order, then stops. Records each request's bytes.
class CannedServer {
 public:
  explicit CannedServer(std::vector<std::string> replies) : replies_(std::move(replies)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  // Unblocks an accept() still waiting for a request the client never sent, so a test that
  // makes fewer requests than expected fails instead of hanging.
  ~CannedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/chat/completions"; }
  const std::vector<std::string>& requests() const { return requests_; }

 private:
  void serve() {
    for (const std::string& reply : replies_) {
      const int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      std::string request;
      char buffer[4096];
      // Read the headers and the body (Content-Length of the test bodies is small).
      while (request.find("\r\n\r\n") == std::string::npos ||
             request.size() < request.find("\r\n\r\n") + 4 + body_length(request)) {
        const ssize_t n = ::read(client, buffer, sizeof buffer);
        if (n <= 0) break;
        request.append(buffer, static_cast<std::size_t>(n));
      }
      requests_.push_back(request);
      if (reply.empty()) {  // never answer: wait until the client gives up
        while (::read(client, buffer, sizeof buffer) > 0) {
        }
        ::close(client);
        continue;
      }
      const std::string response = "HTTP/1.1 " + reply;
      (void)!::write(client, response.data(), response.size());
      ::close(client);
    }
  }
  static std::size_t body_length(const std::string& request) {
    const std::size_t at = request.find("Content-Length: ");
    return at == std::string::npos ? 0 : std::stoul(request.substr(at + 16));
  }

  std::vector<std::string> replies_;
  std::vector<std::string> requests_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

std::string reply(int status, const std::string& body) {
  return std::to_string(status) + " X\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// A port nothing listens on: bound, then closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

const std::atomic<int> kNoStop{0};

}  // namespace

TEST_CASE("a POST sends the body and headers and returns any status as a response") {
  HttpGlobal global;
  REQUIRE(global.ok());
  CannedServer server({reply(200, "{\"ok\":true}"), reply(404, "nope")});
  HttpClient client;
  HttpRequest request{server.url(), "{\"model\":\"m\"}", {"Content-Type: application/json", "X-Test: 1"}};
  auto ok = client.post(request);
  REQUIRE_MESSAGE(ok, ok.status().message());
  CHECK(ok.value().status == 200);
  CHECK(ok.value().body == "{\"ok\":true}");
  auto missing = client.post(request);
  REQUIRE(missing);
  CHECK(missing.value().status == 404);
  REQUIRE(server.requests().size() == 2);
  const std::string& sent = server.requests()[0];
  CHECK(sent.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0) == 0);
  CHECK(sent.find("X-Test: 1\r\n") != std::string::npos);
  CHECK(sent.substr(sent.size() - 13) == "{\"model\":\"m\"}");
}

TEST_CASE("5xx is retried until it succeeds, 4xx is returned at once") {
  HttpGlobal global;
  CannedServer server({reply(500, "down"), reply(503, "busy"), reply(200, "fine"), reply(400, "bad")});
  HttpClient client;
  HttpRequest request{server.url(), "{}", {}};
  std::vector<std::string> retries;
  auto response = client.post_with_retries(request, {3, 0.01, 1.0}, kNoStop,
                                            [&](const std::string& why) { retries.push_back(why); });
  REQUIRE_MESSAGE(response, response.status().message());
  CHECK(response.value().body == "fine");
  REQUIRE(retries.size() == 2);
  CHECK(retries[0].rfind("HTTP 500: down; retrying in 0.01 s", 0) == 0);
  CHECK(retries[1].rfind("HTTP 503: busy; retrying in 0.02 s", 0) == 0);
  retries.clear();
  auto bad = client.post_with_retries(request, {3, 0.01, 1.0}, kNoStop,
                                      [&](const std::string& why) { retries.push_back(why); });
  REQUIRE(bad);
  CHECK(bad.value().status == 400);
  CHECK(retries.empty());
}

TEST_CASE("retries run out with a message naming the URL, the failure and the tries") {
  HttpGlobal global;
  CannedServer server({reply(502, "gateway"), reply(502, "gateway")});
  HttpClient client;
  auto response = client.post_with_retries({server.url(), "{}", {}}, {1, 0.0, 1.0}, kNoStop, nullptr);
  REQUIRE_FALSE(response);
  CHECK(response.status().message() == "POST '" + server.url() + "': HTTP 502: gateway (after 2 tries)");
}

TEST_CASE("no server: a connection error, retried, then a clear failure") {
  HttpGlobal global;
  HttpClient client;
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1/chat/completions";
  int retries = 0;
  auto response = client.post_with_retries({url, "{}", {}}, {2, 0.0, 1.0}, kNoStop,
                                            [&](const std::string&) { ++retries; });
  REQUIRE_FALSE(response);
  CHECK(retries == 2);
  CHECK(response.status().message().find("POST '" + url + "': ") == 0);
  CHECK(response.status().message().find("(after 3 tries)") != std::string::npos);
  CHECK(response.status().message().find("onnect") != std::string::npos);  // libcurl's reason
  auto scheme = client.post({"ftp://127.0.0.1/x", "{}", {}});
  CHECK_FALSE(scheme);  // only http and https
}

TEST_CASE("a stop request ends the wait between retries") {
  HttpGlobal global;
  HttpClient client;
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/";
  const std::atomic<int> stop{15};
  const auto start = std::chrono::steady_clock::now();
  auto response = client.post_with_retries({url, "{}", {}}, {5, 10.0, 30.0}, stop, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(response);
  CHECK(response.status().message().find("stopped by a signal") != std::string::npos);
  CHECK(seconds < 5.0);
}

TEST_CASE("a stop request abandons a transfer under way") {
  HttpGlobal global;
  CannedServer server({""});
  HttpClient client;
  std::atomic<int> stop{0};
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(2);
  });
  const auto start = std::chrono::steady_clock::now();
  auto response = client.post_with_retries({server.url(), "{}", {}, 60.0}, {3, 0.0, 1.0}, stop, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stopper.join();
  REQUIRE_FALSE(response);
  CHECK(response.status().message().find("stopped by a signal") != std::string::npos);
  CHECK(seconds < 5.0);
}
