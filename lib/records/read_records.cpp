// read_records: the reading half of the driver, for modes that consume records (summaries,
// exports) instead of writing them on. Same input rules: shards, blank lines, the bad-line cap and
// the "not JSON Lines" check.
#include <string>

#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_stage.h"

namespace cudaagent {

Status read_records(const CommonOptions& options, Session& session, std::string_view stage,
                    const std::function<Status(const InputRecord&)>& each,
                    std::uint64_t* bad_lines) {
  std::vector<std::string> inputs = options.inputs;
  if (inputs.empty()) inputs.emplace_back("-");
  RecordParser parser;
  std::uint64_t ordinal = 0, bad = 0;
  for (const std::string& input : inputs) {
    auto reader = LineReader::open(input, options.max_record_bytes, &session.stop_signal);
    if (!reader) return reader.status();
    std::uint64_t records = 0, input_bad = 0;
    std::string first_reason;
    InputLine line;
    for (;;) {
      auto more = reader.value().next(line);
      if (!more) return more.status();
      if (!more.value()) break;
      if (!line.oversized && line.bytes.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      if (!options.shard.owns(ordinal++)) continue;
      ++records;
      auto parsed = line.oversized ? Result<simdjson::dom::object>(Status::error("record too long"))
                                   : parser.parse(line.bytes);
      if (!parsed) {
        ++bad;
        ++input_bad;
        if (first_reason.empty()) first_reason = parsed.status().message();
        session.log.warn(std::string(stage) + ": " + cudaagent::quoted(input) + " line " +
                         std::to_string(line.number) + ": " + parsed.status().message());
        if (options.max_bad_lines >= 0 && bad > static_cast<std::uint64_t>(options.max_bad_lines)) {
          return Status::error("more than " + std::to_string(options.max_bad_lines) +
                               " malformed lines (see --max-bad-lines)");
        }
        if (options.max_bad_lines >= 0 && records == 8 && input_bad == 8) break;
        continue;
      }
      InputRecord record{parsed.value(), line.bytes, input, line.number, {}};
      std::string_view id;
      if (!record.object["id"].get(id)) record.id = id;
      if (Status status = each(record); !status) return status;
    }
    if (session.stop_signal.load() != 0) return Status::ok();
    if (options.max_bad_lines >= 0 && records > 0 && input_bad == records) {
      return Status::error((input == "-" ? std::string("stdin") : cudaagent::quoted(input)) +
                           " is not JSON Lines: its first lines are not JSON objects (line 1: " +
                           first_reason + "; see --max-bad-lines)");
    }
  }
  if (bad_lines != nullptr) *bad_lines = bad;
  return Status::ok();
}

}  // namespace cudaagent
