// libmicrohttpd glue: the access handler is called once when the headers are in, once per chunk
// of body, and once more with no data, when the whole request is in; per-connection state (the
// body read so far) lives in *con_cls and is freed by the completion callback.
#include "cudaagent/train/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <cstring>

namespace cudaagent::train {

struct HttpServerCallbacks {
  struct Connection {
    std::string body;
    bool too_large = false;
  };

  static MHD_Result send(MHD_Connection* connection, const HttpServerResponse& reply) {
    MHD_Response* response = MHD_create_response_from_buffer(reply.body.size(), const_cast<char*>(reply.body.data()),
                                                             MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", reply.content_type.c_str());
    const MHD_Result queued = MHD_queue_response(connection, static_cast<unsigned>(reply.status), response);
    MHD_destroy_response(response);
    return queued;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                               const char* /*version*/, const char* upload_data, std::size_t* upload_data_size,
                               void** con_cls) {
    auto* server = static_cast<HttpServer*>(cls);
    if (*con_cls == nullptr) {
      *con_cls = new Connection();
      return MHD_YES;
    }
    auto* state = static_cast<Connection*>(*con_cls);
    if (*upload_data_size > 0) {
      if (state->body.size() + *upload_data_size > server->max_body_bytes_) state->too_large = true;
      else state->body.append(upload_data, *upload_data_size);
      *upload_data_size = 0;
      return MHD_YES;
    }
    HttpServerResponse reply;
    if (state->too_large) {
      reply.status = 413;
      reply.body = R"({"error": {"message": "request body too large", "type": "BadRequestError", "param": null, "code": 413}})";
    } else {
      try {
        reply = (*server->handler_)(HttpServerRequest{method, url, std::move(state->body)});
      } catch (...) {
        reply.status = 500;
        reply.body = std::string(R"({"error": {"message": "internal error", "type": "InternalServerError", "param": null, "code": 500}})");
      }
    }
    return send(connection, reply);
  }

  static void on_completed(void* /*cls*/, MHD_Connection* /*connection*/, void** con_cls,
                           MHD_RequestTerminationCode /*code*/) {
    delete static_cast<Connection*>(*con_cls);
    *con_cls = nullptr;
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options, HttpHandler handler) {
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  const sockaddr* address = nullptr;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
  if (inet_pton(AF_INET, options.host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(options.port);
    address = reinterpret_cast<const sockaddr*>(&v4);
  } else if (inet_pton(AF_INET6, options.host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(options.port);
    address = reinterpret_cast<const sockaddr*>(&v6);
    flags |= MHD_USE_IPv6;
  } else {
    return Status::error("'" + options.host + "' is not an IPv4 or IPv6 address");
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->handler_ = std::make_unique<HttpHandler>(std::move(handler));
  server->max_body_bytes_ = options.max_body_bytes;
  MHD_Daemon* daemon = MHD_start_daemon(
      flags, options.port, nullptr, nullptr, &HttpServerCallbacks::on_request, server.get(), MHD_OPTION_SOCK_ADDR,
      address, MHD_OPTION_CONNECTION_LIMIT, options.connection_limit, MHD_OPTION_NOTIFY_COMPLETED,
      &HttpServerCallbacks::on_completed, nullptr, MHD_OPTION_END);
  if (daemon == nullptr) {
    return Status::error("cannot serve HTTP on " + options.host + ":" + std::to_string(options.port) +
                         " (address in use, or not permitted)");
  }
  server->daemon_ = daemon;
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info != nullptr ? info->port : options.port;
  return server;
}

HttpServer::~HttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(static_cast<MHD_Daemon*>(daemon_));
}

std::string http_server_version() { return std::string("libmicrohttpd ") + MHD_get_version(); }

}  // namespace cudaagent::train
