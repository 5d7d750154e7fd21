// Tensor files: round trips through the writer, and one hand-made hostile file per rule the reader
// enforces (each must fail with a reason that names the problem, never crash or read out of bounds).
#include "cudaagent/candidate/tensor_file.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cudaagent/candidate/tensor_compare.h"
#include "test_support.h"

using cudaagent::Device;
using cudaagent::DType;
using cudaagent::TensorFileLimits;
using cudaagent::TensorTree;
using cudaagent::ValueKind;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;

namespace {

template <class T>
TensorTree tensor_of(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values,
                     Device device = Device::kCuda) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(dtype, std::move(shape), std::move(bytes), device);
}

// A file from raw parts: magic, u32 little-endian header length, header, payload.
std::string catens(std::string_view header, std::string_view payload = {}) {
  std::string out = "CATENS1\n";
  const auto size = static_cast<std::uint32_t>(header.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  out.append(header);
  out.append(payload);
  return out;
}

std::string tensor_json(std::string_view dtype, std::string_view shape, std::string_view offset,
                        std::string_view nbytes) {
  return std::string(R"({"kind":"tensor","dtype":")") + std::string(dtype) + R"(","shape":)" +
         std::string(shape) + R"(,"device":"cuda","python_type":"torch.Tensor","offset":)" +
         std::string(offset) + R"(,"nbytes":)" + std::string(nbytes) + "}";
}

std::string wrap(std::string_view value) { return R"({"value":)" + std::string(value) + "}"; }

// The reader's message for `bytes`, or "ok".
std::string read_message(const std::string& bytes, const TensorFileLimits& limits = {}) {
  TempDir dir;
  const std::string path = dir.file("out.catens");
  write_file(path, bytes);
  auto result = cudaagent::read_tensor_file(path, limits);
  return result.is_ok() ? "ok" : result.status().message();
}

std::string nested_lists(int depth) {
  std::string text;
  for (int i = 0; i < depth - 1; ++i) text += R"({"kind":"list","items":[)";
  text += R"({"kind":"none"})";
  for (int i = 0; i < depth - 1; ++i) text += "]}";
  return text;
}

}  // namespace

TEST_CASE("tensor file round trip keeps every kind, dtype and value") {
  TempDir dir;
  const std::string path = dir.file("out.catens");
  const TensorTree tree = TensorTree::tuple({
      tensor_of<float>(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, NAN}),
      TensorTree::list({TensorTree::integer(-(std::int64_t{1} << 62)), TensorTree::floating(NAN),
                        TensorTree::floating(-INFINITY), TensorTree::floating(INFINITY),
                        TensorTree::floating(1.5), TensorTree::floating(-0.0), TensorTree::floating(1.0),
                        TensorTree::floating(1e300), TensorTree::boolean(true), TensorTree::none()}),
      TensorTree::dict({{"logits", tensor_of<std::uint16_t>(DType::kBFloat16, {2}, {0x3F80, 0xC000})},
                        {"weird \"key\"\n", TensorTree::other("torch.return_types.max")}}),
      tensor_of<float>(DType::kFloat32, {0, 4}, {}),
      tensor_of<std::int64_t>(DType::kInt64, {}, {42}, Device::kCpu),
      tensor_of<std::uint8_t>(DType::kBool, {3}, {0, 1, 1}),
  });
  REQUIRE(cudaagent::write_tensor_file(path, tree).is_ok());
  auto read = cudaagent::read_tensor_file(path);
  REQUIRE_MESSAGE(read.is_ok(), read.status().message());
  const TensorTree& back = read.value();
  CHECK(cudaagent::tensors_bytes_equal(tree, back));
  REQUIRE(back.kind == ValueKind::kTuple);
  REQUIRE(back.items.size() == 6);
  CHECK(back.items[0].shape == std::vector<std::int64_t>{2, 3});
  CHECK(back.items[0].python_type == "torch.Tensor");
  CHECK(std::signbit(back.items[1].items[5].float_value));  // -0.0 survives the JSON text
  CHECK(back.items[1].items[6].kind == ValueKind::kFloat);  // 1.0 is not read back as an int
  CHECK(back.items[2].keys == std::vector<std::string>{"logits", "weird \"key\"\n"});
  CHECK(back.items[3].nbytes == 0);
  CHECK(back.items[4].device == Device::kCpu);
  CHECK(back.items[4].numel() == 1);
  // No temporary file is left next to the output.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
}

TEST_CASE("a tree read from a file outlives the file and its own root") {
  TempDir dir;
  const std::string path = dir.file("out.catens");
  REQUIRE(
      cudaagent::write_tensor_file(path, TensorTree::tuple({tensor_of<float>(DType::kFloat32, {2}, {7, 8})}))
          .is_ok());
  TensorTree leaf;
  {
    auto read = cudaagent::read_tensor_file(path);
    REQUIRE(read.is_ok());
    leaf = read.value().items[0];
  }
  ::unlink(path.c_str());
  float values[2];
  std::memcpy(values, leaf.data.get(), sizeof values);
  CHECK(values[0] == 7.0f);
  CHECK(values[1] == 8.0f);
}

TEST_CASE("a file written the way the Python harness writes it reads") {
  // Member order, whitespace and number spelling as json.dumps produces them.
  const std::string payload("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  const std::string header =
      R"({"value": {"kind": "tuple", "items": [{"kind": "tensor", "dtype": "float32", "shape": [2],)"
      R"( "device": "cuda", "python_type": "torch.Tensor", "offset": 0, "nbytes": 8},)"
      R"( {"kind": "float", "value": null, "nonfinite": "-inf"}, {"kind": "float", "value": 2.5e-08},)"
      R"( {"kind": "dict", "items": {}}, {"kind": "other", "python_type": "builtins.str"}]}})";
  CHECK(read_message(catens(header, payload)) == "ok");
}

TEST_CASE("malformed tensor files are rejected with a precise reason") {
  const std::string f32x2 = tensor_json("float32", "[2]", "0", "8");
  const std::string eight(8, '\0');
  std::string ones_65 = "[1";
  for (int i = 1; i < 65; ++i) ones_65 += ",1";
  ones_65 += "]";
  struct Case {
    const char* name;
    std::string bytes;
    const char* reason;  // a fragment the message must contain
  };
  const std::vector<Case> cases = {
      {"empty file", "", "too short"},
      {"shorter than the preamble", "CATENS1\n\x01", "too short"},
      {"bad magic", "CATENS2\n" + catens(wrap(R"({"kind":"none"})")).substr(8), "bad magic"},
      {"empty header", catens(""), "empty header"},
      {"header length past EOF", catens(wrap(R"({"kind":"none"})")).substr(0, 20), "runs past the end"},
      {"header not JSON", catens("{\"value\":"), "invalid JSON"},
      {"header invalid UTF-8", catens("{\"value\":{\"kind\":\"other\",\"python_type\":\"\xff\"}}"),
       "invalid JSON"},
      {"header not an object", catens("[1]"), "not an object"},
      {"header without value", catens("{}"), "no member \"value\""},
      {"header extra member", catens(R"({"value":{"kind":"none"},"x":1})"), "unknown member \"x\""},
      {"duplicate top-level key", catens(R"({"value":{"kind":"none"},"value":{"kind":"none"}})"),
       "duplicate"},
      {"duplicate member", catens(wrap(R"({"kind":"none","kind":"none"})")), "duplicate member \"kind\""},
      {"duplicate dict key",
       catens(wrap(R"({"kind":"dict","items":{"a":{"kind":"none"},"a":{"kind":"none"}}})")),
       "duplicate key \"a\""},
      {"value not an object", catens(wrap("3")), "not an object"},
      {"missing kind", catens(wrap("{}")), "no member \"kind\""},
      {"unknown kind", catens(wrap(R"({"kind":"set"})")), "unknown kind \"set\""},
      {"unknown member", catens(wrap(R"({"kind":"none","strides":[1]})")), "unknown member \"strides\""},
      {"member of another kind", catens(wrap(R"({"kind":"none","items":[]})")), "does not belong"},
      {"missing member", catens(wrap(R"({"kind":"int"})")), "needs member \"value\""},
      {"unknown dtype", catens(wrap(tensor_json("complex64", "[1]", "0", "8")), eight),
       "unknown dtype \"complex64\""},
      {"unknown device",
       catens(wrap(R"({"kind":"tensor","dtype":"float32","shape":[2],"device":"mps",)"
                   R"("python_type":"torch.Tensor","offset":0,"nbytes":8})"),
              eight),
       "unknown device \"mps\""},
      {"empty python_type", catens(wrap(R"({"kind":"other","python_type":""})")), "empty"},
      {"nbytes mismatch", catens(wrap(tensor_json("float32", "[3]", "0", "8")), eight), "needs 12"},
      {"nbytes past the payload", catens(wrap(tensor_json("float32", "[4]", "0", "16")), eight),
       "run past the end"},
      {"offset past the payload",
       catens(wrap(tensor_json("float32", "[2]", "18446744073709551615", "8")), eight),
       "offset 18446744073709551615, expected 0"},
      {"offset with a gap", catens(wrap(tensor_json("float32", "[1]", "4", "4")), eight),
       "offset 4, expected 0"},
      {"overlapping tensors",
       catens(wrap(R"({"kind":"tuple","items":[)" + f32x2 + "," + f32x2 + "]}"), eight + eight),
       "offset 0, expected 8"},
      {"negative offset", catens(wrap(tensor_json("float32", "[2]", "-8", "8")), eight),
       "\"offset\" is negative"},
      {"fractional nbytes", catens(wrap(tensor_json("float32", "[2]", "0", "8.0")), eight), "not an integer"},
      {"negative shape", catens(wrap(tensor_json("float32", "[-2]", "0", "8")), eight), "negative"},
      {"2^62 elements overflow", catens(wrap(tensor_json("float32", "[4611686018427387904]", "0", "0"))),
       "overflows"},
      {"product overflow", catens(wrap(tensor_json("uint8", "[4294967296,4294967296,0]", "0", "0"))),
       "overflows"},
      {"shape past int64", catens(wrap(tensor_json("uint8", "[18446744073709551615]", "0", "0"))), "int64"},
      {"fractional shape", catens(wrap(tensor_json("uint8", "[1.5]", "0", "0"))), "not an integer"},
      {"rank over 64", catens(wrap(tensor_json("uint8", ones_65, "0", "1")), "\x01"),
       "more than 64 dimensions"},
      {"trailing garbage", catens(wrap(f32x2), eight + "x"), "1 bytes after the last tensor"},
      {"payload without tensors", catens(wrap(R"({"kind":"none"})"), "x"), "1 bytes after the last tensor"},
      {"int past int64", catens(wrap(R"({"kind":"int","value":18446744073709551615})")),
       "does not fit in int64"},
      {"int as float", catens(wrap(R"({"kind":"int","value":1.0})")), "not an integer"},
      {"bool not a boolean", catens(wrap(R"({"kind":"bool","value":1})")), "not true or false"},
      {"float null without nonfinite", catens(wrap(R"({"kind":"float","value":null})")),
       "without \"nonfinite\""},
      {"float NaN literal", catens(wrap(R"({"kind":"float","value":NaN})")), "invalid JSON"},
      {"float string", catens(wrap(R"({"kind":"float","value":"1"})")), "a string"},
      {"nonfinite with a number", catens(wrap(R"({"kind":"float","value":1,"nonfinite":"nan"})")), "numeric"},
      {"nonfinite unknown", catens(wrap(R"({"kind":"float","value":null,"nonfinite":"NaN"})")),
       "not nan, inf"},
      {"items not an array", catens(wrap(R"({"kind":"tuple","items":{}})")), "not an array"},
      {"17 levels deep", catens(wrap(nested_lists(17))), "deeper than 16 levels"},
      {"100000 levels deep", catens(wrap(std::string(100000, '[') + std::string(100000, ']'))),
       "deeper than 16 levels"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string message = read_message(c.bytes);
    CHECK_MESSAGE(message.find(c.reason) != std::string::npos, message);
  }
  CHECK(read_message(catens(wrap(nested_lists(16)))) == "ok");
}

TEST_CASE("errors name the value and quote hostile text safely") {
  const std::string message = read_message(
      catens(wrap(R"({"kind":"dict","items":{"a\nb":{"kind":"tuple","items":[{"kind":"x\u001b[31m"}]}}})")));
  CHECK(message.find(R"(value["a\nb"][0]: unknown kind "x\u001b[31m")") != std::string::npos);
  CHECK(message.find('\x1b') == std::string::npos);
  const std::string long_kind(5000, 'k');
  CHECK(read_message(catens(wrap(R"({"kind":")" + long_kind + "\"}"))).size() < 300);
}

TEST_CASE("value count, header and file size caps") {
  std::string items;
  for (int i = 0; i < 10000; ++i) items += std::string(i ? "," : "") + R"({"kind":"none"})";
  CHECK(read_message(catens(wrap(R"({"kind":"list","items":[)" + items + "]}")))
            .find("more than 10000 values") != std::string::npos);
  std::string keys;
  for (int i = 0; i < 10001; ++i)
    keys += std::string(i ? "," : "") + "\"k" + std::to_string(i) + R"(":{"kind":"none"})";
  CHECK(read_message(catens(wrap(R"({"kind":"dict","items":{)" + keys + "}}")))
            .find("more than 10000 values") != std::string::npos);

  TensorFileLimits small;
  small.max_header_bytes = 16;
  CHECK(read_message(catens(wrap(R"({"kind":"none"})")), small).find("over the 16-byte cap") !=
        std::string::npos);
  small = {};
  small.max_file_bytes = 20;
  CHECK(read_message(catens(wrap(R"({"kind":"none"})")), small).find("over the 20-byte cap") !=
        std::string::npos);
  // A header length field of 4 GiB - 1 is refused by the cap before anything else.
  CHECK(read_message(std::string("CATENS1\n\xff\xff\xff\xff", 12) + "{}").find("cap") != std::string::npos);
}

TEST_CASE("only regular files are read, and never through a final symbolic link") {
  TempDir dir;
  const std::string real = dir.file("real.catens");
  write_file(real, catens(wrap(R"({"kind":"none"})")));
  REQUIRE(cudaagent::read_tensor_file(real).is_ok());

  const std::string link = dir.file("link.catens");
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  CHECK(cudaagent::read_tensor_file(link).status().message().find("symbolic link") != std::string::npos);
  CHECK(cudaagent::read_tensor_file(dir.path().string()).status().message().find("not a regular file") !=
        std::string::npos);
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(cudaagent::read_tensor_file(fifo).status().message().find("not a regular file") != std::string::npos);
  CHECK(cudaagent::read_tensor_file(dir.file("missing")).status().message().find("cannot open") !=
        std::string::npos);
}

TEST_CASE("a result channel handed over as a descriptor reads without any path") {
  const int fd = ::memfd_create("catens", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::string bytes = catens(wrap(tensor_json("int32", "[1]", "0", "4")), std::string("\x2a\0\0\0", 4));
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  auto read = cudaagent::read_tensor_fd(fd, "memfd");
  REQUIRE_MESSAGE(read.is_ok(), read.status().message());
  std::int32_t value = 0;
  std::memcpy(&value, read.value().data.get(), sizeof value);
  CHECK(value == 42);
  CHECK(::fcntl(fd, F_GETFD) != -1);  // still the caller's
  ::close(fd);
  // The mapping outlives the descriptor.
  std::memcpy(&value, read.value().data.get(), sizeof value);
  CHECK(value == 42);
  CHECK(cudaagent::read_tensor_fd(-1, "nothing").status().message().rfind("'nothing': ", 0) == 0);
}

TEST_CASE("the writer refuses trees that would not read back") {
  TempDir dir;
  const std::string path = dir.file("out.catens");
  CHECK_FALSE(cudaagent::write_tensor_file(path, tensor_of<float>(DType::kFloat32, {3}, {1, 2})).is_ok());
  CHECK_FALSE(cudaagent::write_tensor_file(path, tensor_of<float>(DType::kFloat32, {-1}, {})).is_ok());
  TensorTree dup = TensorTree::dict({{"a", TensorTree::none()}, {"a", TensorTree::none()}});
  CHECK_FALSE(cudaagent::write_tensor_file(path, dup).is_ok());
  CHECK_FALSE(cudaagent::write_tensor_file(path, TensorTree::other("")).is_ok());
  TensorTree deep = TensorTree::none();
  for (int i = 0; i < 16; ++i) deep = TensorTree::list({deep});
  CHECK(cudaagent::write_tensor_file(path, deep).message().find("nest deeper") != std::string::npos);
  // Nothing was written, not even a temporary file.
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK(cudaagent::write_tensor_file(dir.file("no/such/dir/out"), TensorTree::none())
            .message()
            .find("cannot create") != std::string::npos);
}

TEST_CASE("dtype names, sizes and kinds") {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                      DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kBool}) {
    CHECK(cudaagent::dtype_from_name(cudaagent::dtype_name(dtype)) == dtype);
  }
  CHECK_FALSE(cudaagent::dtype_from_name("Float32").has_value());
  CHECK(cudaagent::dtype_size(DType::kBFloat16) == 2);
  CHECK(cudaagent::dtype_size(DType::kFloat64) == 8);
  CHECK(cudaagent::dtype_size(DType::kBool) == 1);
  CHECK(cudaagent::dtype_is_floating(DType::kBFloat16));
  CHECK_FALSE(cudaagent::dtype_is_floating(DType::kInt64));
}
