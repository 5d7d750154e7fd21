// Reading the train fixtures (tests/fixtures/train) in the unit tests: the files Hugging Face's
// libraries wrote, parsed with simdjson.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.h"

namespace cudaagent::testing {

inline std::string train_fixture(const std::string& name) {
  return std::string(CUDAAGENT_TRAIN_FIXTURES) + "/" + name;
}

// The document in fixture file `name`; the parser must outlive the element.
inline simdjson::dom::element load_fixture(simdjson::dom::parser& parser, const std::string& name) {
  simdjson::dom::element root;
  if (parser.load(train_fixture(name)).get(root) != simdjson::SUCCESS) throw std::runtime_error("cannot load " + name);
  return root;
}

inline simdjson::dom::array array_of(simdjson::dom::element e) {
  simdjson::dom::array a;
  if (e.get(a) != simdjson::SUCCESS) throw std::runtime_error("not an array");
  return a;
}

inline std::string string_of(simdjson::dom::element e) {
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) throw std::runtime_error("not a string");
  return std::string(s);
}

inline std::int64_t int_of(simdjson::dom::element e) {
  std::int64_t v = 0;
  if (e.get(v) != simdjson::SUCCESS) throw std::runtime_error("not an integer");
  return v;
}

inline std::vector<std::int32_t> int_list(simdjson::dom::element e) {
  std::vector<std::int32_t> out;
  for (simdjson::dom::element x : array_of(e)) out.push_back(static_cast<std::int32_t>(int_of(x)));
  return out;
}

inline std::vector<double> double_list(simdjson::dom::element e) {
  std::vector<double> out;
  for (simdjson::dom::element x : array_of(e)) {
    double v = 0;
    if (x.get(v) != simdjson::SUCCESS) throw std::runtime_error("not a number");
    out.push_back(v);
  }
  return out;
}

}  // namespace cudaagent::testing
