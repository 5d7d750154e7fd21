// The libmicrohttpd wrapper over a real socket: a POST body reaches the handler whole, the
// handler's status and body come back, a body over the limit gets 413, exceptions become 500.
#include "cudaagent/train/http_server.h"

#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>

#include "cudaagent/llm/http.h"

namespace cudaagent::train {
namespace {

TEST_CASE("requests reach the handler and its answers come back") {
  HttpGlobal global;
  REQUIRE(global.ok());
  HttpServerOptions options;
  options.port = 0;
  options.max_body_bytes = 1000;
  auto server = HttpServer::start(options, [](const HttpServerRequest& r) {
    if (r.path == "/throw") throw std::runtime_error("boom");
    return HttpServerResponse{201, r.method + " " + r.path + " " + std::to_string(r.body.size()), "text/plain"};
  });
  REQUIRE_MESSAGE(server.is_ok(), server.status().message());
  const std::string base = "http://127.0.0.1:" + std::to_string(server.value()->port());
  CHECK(server.value()->port() != 0);
  HttpClient client;
  HttpRequest request;
  request.url = base + "/echo";
  request.body = std::string(600, 'x');
  auto response = client.post(request);
  REQUIRE(response.is_ok());
  CHECK(response.value().status == 201);
  CHECK(response.value().body == "POST /echo 600");
  request.body = std::string(1500, 'x');
  response = client.post(request);
  REQUIRE(response.is_ok());
  CHECK(response.value().status == 413);
  request.url = base + "/throw";
  request.body = "{}";
  response = client.post(request);
  REQUIRE(response.is_ok());
  CHECK(response.value().status == 500);
  CHECK_FALSE(HttpServer::start(HttpServerOptions{"not-an-address", 0, 1000, 10}, {}).is_ok());
}

}  // namespace
}  // namespace cudaagent::train
