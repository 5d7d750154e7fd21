// The evaluation socket's thread: poll() on the listening socket and an eventfd that stops it;
// each connection is read with a short deadline (a shim that connects and says nothing cannot
// hold the episode's evaluations hostage) and answered in full before the next one is accepted.
#include "cudaagent/rollout/eval_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace cudaagent::rollout {
namespace {

long long steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads one line of at most 64 bytes within `seconds`; empty when none came.
std::string read_request(int fd, double seconds) {
  std::string line;
  const long long deadline = steady_ns() + static_cast<long long>(seconds * 1e9);
  char buffer[64];
  while (line.find('\n') == std::string::npos && line.size() < 64) {
    const long long left_ms = (deadline - steady_ns()) / 1000000;
    if (left_ms <= 0) break;
    pollfd watch{fd, POLLIN, 0};
    if (::poll(&watch, 1, static_cast<int>(left_ms)) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    line.append(buffer, static_cast<std::size_t>(n));
  }
  line = line.substr(0, line.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line.substr(0, 32);
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the shim went away (its command was killed): nothing to do
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

Result<std::unique_ptr<EvalServer>> EvalServer::start(const std::string& socket_path,
                                                      EpisodeEvaluator& evaluator, EvalRequest request,
                                                      int max_calls) {
  sockaddr_un address{};
  if (socket_path.size() >= sizeof address.sun_path) {
    return Status::error("the evaluation socket path '" + socket_path + "' is too long for a Unix socket");
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::error(std::string("cannot create a Unix socket: ") + std::strerror(errno));
  ::unlink(socket_path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, 8) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::error("cannot listen on '" + socket_path + "': " + why);
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    ::close(fd);
    return Status::error(std::string("cannot create an eventfd: ") + std::strerror(errno));
  }
  std::unique_ptr<EvalServer> server(
      new EvalServer(socket_path, evaluator, std::move(request), max_calls, fd, wake));
  server->thread_ = std::thread([raw = server.get()] { raw->serve(); });
  return server;
}

EvalServer::EvalServer(std::string socket_path, EpisodeEvaluator& evaluator, EvalRequest request,
                       int max_calls, int listen_fd, int wake_fd)
    : socket_path_(std::move(socket_path)),
      evaluator_(evaluator),
      request_(std::move(request)),
      max_calls_(max_calls),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd) {}

EvalServer::~EvalServer() {
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::unlink(socket_path_.c_str());
}

double EvalServer::busy_seconds() const {
  long long busy = busy_ns_.load();
  const long long started = call_started_ns_.load();
  if (started != 0) busy += steady_ns() - started;
  return static_cast<double>(busy) / 1e9;
}

std::vector<EvalCall> EvalServer::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

void EvalServer::serve() {
  for (;;) {
    pollfd watch[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(watch, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (watch[1].revents != 0) return;
    if ((watch[0].revents & POLLIN) == 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    answer(client);
    ::close(client);
  }
}

void EvalServer::answer(int client) {
  const std::string op = read_request(client, 10.0);
  const long long started = steady_ns();
  call_started_ns_.store(started);
  EvalCall call;
  call.op = op;
  call.turn = turn_.load();
  EvalReply reply;
  if (op != "compile" && op != "verify" && op != "profile") {
    reply = {"unknown evaluation request '" + op + "' (the shims ask for compile, verify or profile)\n", 2,
             "unknown"};
  } else if (evaluations_++ >= max_calls_) {
    reply = {"this episode has used all " + std::to_string(max_calls_) +
                 " of its evaluations; the workspace will be scored as it stands when you finish\n",
             3, "budget"};
  } else {
    try {  // the evaluator's failures are answers; an exception must not end the rollout
      reply = op == "compile"  ? evaluator_.compile(request_)
              : op == "verify" ? evaluator_.verify(request_)
                               : evaluator_.profile(request_);
    } catch (const std::exception& error) {
      reply = {std::string("the evaluator failed: ") + error.what() + "\n", 2, "INFRA_ERROR"};
    }
  }
  const long long ended = steady_ns();
  busy_ns_.fetch_add(ended - started);
  call_started_ns_.store(0);
  call.seconds = static_cast<double>(ended - started) / 1e9;
  call.exit_code = reply.exit_code;
  call.verdict = reply.verdict;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(std::move(call));
  }
  std::string text = "exit " + std::to_string(reply.exit_code) + "\n" + reply.text;
  send_all(client, text);
}

}  // namespace cudaagent::rollout
