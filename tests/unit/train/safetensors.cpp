// Safetensors: a file we write reads back (names, dtypes, shapes, bytes); sharding writes an
// index that the reader follows; a header that lies about offsets or sizes is refused.
#include "cudaagent/train/safetensors.h"

#include <doctest/doctest.h>

#include <cstring>

#include "fixtures.h"

namespace cudaagent::train {
namespace {

TensorToWrite tensor(const std::string& name, std::vector<std::int64_t> shape, float value) {
  TensorToWrite t;
  t.name = name;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.fill = [value, n = t.byte_size() / 4](std::byte* out) {
    for (std::uint64_t i = 0; i < n; ++i) {
      const float v = value + static_cast<float>(i);
      std::memcpy(out + 4 * i, &v, 4);
    }
  };
  return t;
}

float first_float(const TensorView& view) {
  float v = 0;
  std::memcpy(&v, view.bytes.data(), 4);
  return v;
}

TEST_CASE("written files read back, sharded ones through their index") {
  testing::TempDir dir;
  std::vector<TensorToWrite> tensors = {tensor("b", {3, 4}, 1.0f), tensor("a", {5}, 100.0f), tensor("c", {2, 2, 2}, -1.0f)};
  REQUIRE(write_checkpoint_weights(dir.path().string(), tensors, 40).is_ok());  // 48 + 20 + 32 bytes
  CHECK(std::filesystem::exists(dir.file("model.safetensors.index.json")));
  CHECK(std::filesystem::exists(dir.file("model-00003-of-00003.safetensors")));
  auto checkpoint = Checkpoint::open(dir.path().string());
  REQUIRE_MESSAGE(checkpoint.is_ok(), checkpoint.status().message());
  CHECK(checkpoint.value().names() == std::vector<std::string>{"a", "b", "c"});
  const auto b = checkpoint.value().find("b");
  REQUIRE(b.has_value());
  CHECK(b->info->shape == std::vector<std::int64_t>{3, 4});
  CHECK(first_float(*b) == 1.0f);
  CHECK(first_float(*checkpoint.value().find("a")) == 100.0f);
  CHECK_FALSE(checkpoint.value().find("d").has_value());

  testing::TempDir single;
  REQUIRE(write_checkpoint_weights(single.path().string(), {tensor("x", {2}, 7.0f)}, 1000).is_ok());
  auto one = Checkpoint::open(single.path().string());
  REQUIRE(one.is_ok());
  CHECK(first_float(*one.value().find("x")) == 7.0f);
  CHECK(one.value().files().size() == 1);
}

TEST_CASE("headers that do not describe the file are refused") {
  testing::TempDir dir;
  const auto write = [&](const std::string& header, std::size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    bytes += header + std::string(data_bytes, '\0');
    testing::write_file(dir.file("t.safetensors"), bytes);
    return Checkpoint::open(dir.file("t.safetensors"));
  };
  CHECK(write(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8).is_ok());
  const std::pair<std::string, std::string> bad[] = {
      {R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", "beyond the file"},
      {R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "does not match"},
      {R"({"x": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", "not supported"},
      {R"({"x": {"shape": [2]}})", "lacks"},
      {R"(not json)", "not a JSON object"},
  };
  for (const auto& [header, word] : bad) {
    CAPTURE(header);
    auto opened = write(header, 8);
    REQUIRE_FALSE(opened.is_ok());
    CHECK(opened.status().message().find(word) != std::string::npos);
  }
  testing::write_file(dir.file("short.safetensors"), "\xff\xff\xff\xff\xff\xff\xff\x7f{}");
  CHECK_FALSE(Checkpoint::open(dir.file("short.safetensors")).is_ok());
}

}  // namespace
}  // namespace cudaagent::train
