// Status and Result<T>: expected failures are values, not exceptions (after LevelDB).
// A Status is ok or carries a message meant for a person; Result<T> holds a value or a Status.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace cudaagent {

class [[nodiscard]] Status {
 public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  // The reason, for people: "cannot open 'runs.db': database is locked". Empty when ok.
  const std::string& message() const { return message_; }

  // Prefixes the message with context ("reading 'x.jsonl': " + message); ok stays ok.
  Status with_context(const std::string& context) const {
    return failed_ ? Status(context + ": " + message_) : *this;
  }

 private:
  Status() = default;
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}           // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {}    // NOLINT(google-explicit-constructor)

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }
  // Precondition for value(): is_ok().
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  // The failure; ok() when the result holds a value.
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(state_); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace cudaagent
