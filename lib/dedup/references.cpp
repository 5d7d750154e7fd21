// Reference sets for cudaagent-dedup: a checkout of task files (KernelBench's level*/NN_name.py)
// or a JSONL file of task records. Entries are read in a fixed order (sorted paths, file order) so
// that "the first of equally near neighbours" means the same entry on every machine.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "cudaagent/base/files.h"
#include "cudaagent/dedup/stage.h"
#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/record.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

bool is_set_name(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

void read_file_entry(const fs::path& path, std::string name, std::uint64_t max_bytes,
                     ReferenceSet& set, Session& session) {
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (!error && size > max_bytes) {
    session.log.warn("skipping reference " + cudaagent::quoted(path.string()) + ": " +
                     std::to_string(size) + " bytes exceeds --max-record-bytes");
    return;
  }
  std::string source;
  if (error || !read_whole_file(path.string(), source)) {
    session.log.warn("skipping reference " + cudaagent::quoted(path.string()) + ": cannot read it");
    return;
  }
  set.tasks.push_back({std::move(name), std::move(source)});
}

Status read_directory(const fs::path& root, std::uint64_t max_bytes, ReferenceSet& set,
                      Session& session) {
  std::error_code error;
  std::vector<fs::path> files;
  auto it =
      fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, error);
  if (error)
    return Status::error("cannot read " + cudaagent::quoted(root.string()) + ": " +
                         error.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) break;
    if (it->path().extension() == ".py" && it->is_regular_file(error)) files.push_back(it->path());
  }
  if (error)
    return Status::error("cannot read " + cudaagent::quoted(root.string()) + ": " +
                         error.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    read_file_entry(file, file.lexically_relative(root).generic_string(), max_bytes, set, session);
  }
  return Status::ok();
}

Status read_jsonl(const std::string& path, std::uint64_t max_bytes, ReferenceSet& set,
                  Session& session) {
  auto reader = LineReader::open(path, max_bytes);
  if (!reader) return reader.status();
  RecordParser parser;
  InputLine line;
  for (;;) {
    auto more = reader.value().next(line);
    if (!more) return more.status();
    if (!more.value()) break;
    if (line.bytes.find_first_not_of(" \t\r") == std::string_view::npos && !line.oversized)
      continue;
    const std::string where = cudaagent::quoted(path) + " line " + std::to_string(line.number);
    if (line.oversized) {
      session.log.warn("skipping reference " + where + ": longer than --max-record-bytes");
      continue;
    }
    auto record = parser.parse(line.bytes);
    if (!record) {
      session.log.warn("skipping reference " + where + ": " + record.status().message());
      continue;
    }
    std::string_view source, id;
    if (record.value()["task"]["model_py"].get(source)) {
      session.log.warn("skipping reference " + where + ": no task.model_py string");
      continue;
    }
    std::string name =
        record.value()["id"].get(id) ? "line " + std::to_string(line.number) : std::string(id);
    set.tasks.push_back({std::move(name), std::string(source)});
  }
  return Status::ok();
}

}  // namespace

Result<ReferenceSet> read_reference_set(const std::string& spec, std::uint64_t max_bytes,
                                        Session& session) {
  ReferenceSet set;
  std::string path = spec;
  if (const auto equals = spec.find('=');
      equals != std::string::npos && is_set_name(std::string_view(spec).substr(0, equals))) {
    set.name = spec.substr(0, equals);
    path = spec.substr(equals + 1);
  }
  if (path.empty()) return Status::error("reference " + cudaagent::quoted(spec) + " names no path");
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error)
    return Status::error("cannot open reference " + cudaagent::quoted(path) + ": " +
                         error.message());
  if (set.name.empty()) {
    fs::path trimmed = fs::path(path).lexically_normal();
    if (!trimmed.has_filename()) trimmed = trimmed.parent_path();
    set.name = trimmed.filename().string();
    if (set.name.empty() || set.name == ".") set.name = path;
  }
  if (fs::is_directory(status)) {
    if (Status read = read_directory(path, max_bytes, set, session); !read) return read;
  } else if (fs::path(path).extension() == ".py") {
    read_file_entry(path, fs::path(path).filename().string(), max_bytes, set, session);
  } else {
    if (Status read = read_jsonl(path, max_bytes, set, session); !read) return read;
  }
  return set;
}

}  // namespace cudaagent
