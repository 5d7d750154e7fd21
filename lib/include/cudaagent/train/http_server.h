// A small HTTP/1.1 server on GNU libmicrohttpd, one thread per connection: a handler may block for
// as long as a generation takes without holding up other clients, and no thread-pool size has to
// match the batch size. Bodies are read whole (up to a limit) and handed to one synchronous
// handler; what the handler returns is sent as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cudaagent/base/status.h"

namespace cudaagent::train {

struct HttpServerRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // "/v1/models"
  std::string body;
};

struct HttpServerResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Called from connection threads, concurrently: must be thread-safe. Exceptions become HTTP 500.
using HttpHandler = std::function<HttpServerResponse(const HttpServerRequest&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 or IPv6 address literal
  std::uint16_t port = 8000;       // 0: any free port (see HttpServer::port)
  std::size_t max_body_bytes = 64u << 20;  // larger bodies get 413
  unsigned connection_limit = 1024;
};

class HttpServer {
 public:
  // Binds and starts serving. A Status when the address cannot be bound (in use, no permission,
  // not an address).
  static Result<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options, HttpHandler handler);
  // Stops accepting and waits for the connection threads to finish their requests.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  HttpServer() = default;
  void* daemon_ = nullptr;  // MHD_Daemon*, opaque here so users need no libmicrohttpd header
  std::uint16_t port_ = 0;
  std::unique_ptr<HttpHandler> handler_;
  std::size_t max_body_bytes_ = 0;
  friend struct HttpServerCallbacks;
};

// "libmicrohttpd 0.9.75", for --version.
std::string http_server_version();

}  // namespace cudaagent::train
