// Reading and writing CATENS1 tensor files (format in tensor_file.h). The reader checks the whole
// header against an exact schema before anyone looks at a payload byte; the canonical packed layout
// (each offset equals the previous end) makes overlap, gaps and trailing bytes impossible to miss.
#include "cudaagent/candidate/tensor_file.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "cudaagent/base/errno_text.h"
#include "cudaagent/base/json_writer.h"

namespace cudaagent {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr std::array<char, 8> kMagic = {'C', 'A', 'T', 'E', 'N', 'S', '1', '\n'};
constexpr std::size_t kPreambleBytes = 12;  // magic + u32 header length
constexpr std::size_t kMaxRank = 64;
constexpr std::size_t kMessageTextCap = 80;  // untrusted text quoted in a message is cut here

// A read-only private mapping of a whole file, unmapped on destruction.
class MappedFile {
 public:
  MappedFile(void* address, std::size_t size) : address_(address), size_(size) {}
  ~MappedFile() {
    if (size_ != 0) ::munmap(address_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::byte* bytes() const { return static_cast<const std::byte*>(address_); }
  std::size_t size() const { return size_; }

 private:
  void* address_;
  std::size_t size_;
};

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// numel * element size, or nullopt when a dimension is negative or the product overflows.
std::optional<std::uint64_t> checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype) {
  std::uint64_t total = dtype_size(dtype);
  for (std::int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

std::string shape_list(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

const char* json_type_name(element_type type) {
  switch (type) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "a number";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "an unknown JSON type";
}

// The members a value object may have. One slot per name; a kind says which slots it requires.
enum Member : std::size_t {
  kKind,
  kDtype,
  kShape,
  kDevice,
  kPythonType,
  kOffset,
  kNbytes,
  kItems,
  kValue,
  kNonfinite,
  kMemberCount
};
constexpr std::array<std::string_view, kMemberCount> kMemberNames = {
    "kind", "dtype", "shape", "device", "python_type", "offset", "nbytes", "items", "value", "nonfinite"};

// Walks the parsed header into a TensorTree, checking every rule of the format.
class HeaderReader {
 public:
  HeaderReader(const TensorFileLimits& limits, std::shared_ptr<const MappedFile> file,
               std::size_t payload_start)
      : limits_(limits),
        file_(std::move(file)),
        payload_start_(payload_start),
        payload_size_(file_->size() - payload_start) {}

  Status read_root(element root, TensorTree& out) {
    simdjson::dom::object object;
    if (root.get_object().get(object)) {
      return Status::error(std::string("header is ") + json_type_name(root.type()) + ", not an object");
    }
    std::optional<element> value;
    for (auto field : object) {
      if (field.key != "value")
        return Status::error("header has an unknown member " + quote_for_message(field.key));
      if (value) return Status::error("header has a duplicate member \"value\"");
      value = field.value;
    }
    if (!value) return Status::error("header has no member \"value\"");
    std::string path = "value";
    if (Status status = read_value(*value, 1, path, out); !status) return status;
    if (next_offset_ != payload_size_) {
      return Status::error("payload has " + std::to_string(payload_size_ - next_offset_) +
                           " bytes after the last tensor (the file must end where the last tensor ends)");
    }
    return Status::ok();
  }

 private:
  static Status fail(const std::string& path, const std::string& reason) {
    return Status::error(path + ": " + reason);
  }

  Status read_value(element value, int depth, std::string& path, TensorTree& out) {
    if (depth > limits_.max_depth) {
      return fail(path, "values nest deeper than " + std::to_string(limits_.max_depth) + " levels");
    }
    if (++values_ > limits_.max_values) {
      return fail(path, "more than " + std::to_string(limits_.max_values) + " values in the file");
    }
    simdjson::dom::object object;
    if (value.get_object().get(object)) {
      return fail(path, std::string("value is ") + json_type_name(value.type()) + ", not an object");
    }
    std::array<std::optional<element>, kMemberCount> members;
    for (auto field : object) {
      const auto name = std::find(kMemberNames.begin(), kMemberNames.end(), field.key);
      if (name == kMemberNames.end()) return fail(path, "unknown member " + quote_for_message(field.key));
      auto& slot = members[static_cast<std::size_t>(name - kMemberNames.begin())];
      if (slot) return fail(path, "duplicate member " + quote_for_message(field.key));
      slot = field.value;
    }
    if (!members[kKind]) return fail(path, "no member \"kind\"");
    std::string_view kind;
    if (members[kKind]->get_string().get(kind)) return fail(path, "\"kind\" is not a string");

    // Which members each kind takes, besides "kind"; anything else present is an error.
    auto expect = [&](std::initializer_list<Member> allowed) -> Status {
      for (std::size_t m = 0; m < kMemberCount; ++m) {
        if (m == kKind) continue;
        const bool wanted = std::find(allowed.begin(), allowed.end(), m) != allowed.end();
        // "nonfinite" is the one optional member; read_float decides whether it must be there.
        if (members[m] && !wanted) {
          return fail(path, "member \"" + std::string(kMemberNames[m]) + "\" does not belong to kind " +
                                quote_for_message(kind));
        }
        if (!members[m] && wanted && m != kNonfinite) {
          return fail(path, "kind " + quote_for_message(kind) + " needs member \"" +
                                std::string(kMemberNames[m]) + "\"");
        }
      }
      return Status::ok();
    };

    if (kind == "tensor") {
      if (Status s = expect({kDtype, kShape, kDevice, kPythonType, kOffset, kNbytes}); !s) return s;
      return read_tensor(members, path, out);
    }
    if (kind == "tuple" || kind == "list") {
      if (Status s = expect({kItems}); !s) return s;
      out.kind = kind == "tuple" ? ValueKind::kTuple : ValueKind::kList;
      simdjson::dom::array items;
      if (members[kItems]->get_array().get(items)) return fail(path, "\"items\" is not an array");
      std::size_t index = 0;
      for (element item : items) {
        const std::size_t saved = path.size();
        path += "[" + std::to_string(index++) + "]";
        out.items.emplace_back();
        if (Status s = read_value(item, depth + 1, path, out.items.back()); !s) return s;
        path.resize(saved);
      }
      return Status::ok();
    }
    if (kind == "dict") {
      if (Status s = expect({kItems}); !s) return s;
      out.kind = ValueKind::kDict;
      simdjson::dom::object items;
      if (members[kItems]->get_object().get(items)) return fail(path, "\"items\" is not an object");
      std::vector<std::string_view> keys;
      for (auto field : items) {
        // Bounded before the duplicate check sorts them.
        if (keys.size() >= limits_.max_values) {
          return fail(path, "more than " + std::to_string(limits_.max_values) + " values in the file");
        }
        keys.push_back(field.key);
      }
      std::sort(keys.begin(), keys.end());
      if (auto dup = std::adjacent_find(keys.begin(), keys.end()); dup != keys.end()) {
        return fail(path, "duplicate key " + quote_for_message(*dup));
      }
      for (auto field : items) {
        const std::size_t saved = path.size();
        append_path_key(path, field.key);
        out.keys.emplace_back(field.key);
        out.items.emplace_back();
        if (Status s = read_value(field.value, depth + 1, path, out.items.back()); !s) return s;
        path.resize(saved);
      }
      return Status::ok();
    }
    if (kind == "int") {
      if (Status s = expect({kValue}); !s) return s;
      out.kind = ValueKind::kInt;
      if (members[kValue]->type() == element_type::UINT64)
        return fail(path, "int value does not fit in int64");
      if (members[kValue]->get_int64().get(out.int_value)) return fail(path, "int value is not an integer");
      return Status::ok();
    }
    if (kind == "float") {
      if (Status s = expect({kValue, kNonfinite}); !s) return s;
      out.kind = ValueKind::kFloat;
      return read_float(*members[kValue], members[kNonfinite], path, out.float_value);
    }
    if (kind == "bool") {
      if (Status s = expect({kValue}); !s) return s;
      out.kind = ValueKind::kBool;
      if (members[kValue]->get_bool().get(out.bool_value))
        return fail(path, "bool value is not true or false");
      return Status::ok();
    }
    if (kind == "none") {
      if (Status s = expect({}); !s) return s;
      out.kind = ValueKind::kNone;
      return Status::ok();
    }
    if (kind == "other") {
      if (Status s = expect({kPythonType}); !s) return s;
      out.kind = ValueKind::kOther;
      return read_python_type(*members[kPythonType], path, out.python_type);
    }
    return fail(path, "unknown kind " + quote_for_message(kind));
  }

  static Status read_float(element value, std::optional<element> nonfinite, const std::string& path,
                           double& out) {
    if (value.is_null()) {
      std::string_view name;
      if (!nonfinite) return fail(path, "float value is null without \"nonfinite\"");
      if (nonfinite->get_string().get(name)) return fail(path, "\"nonfinite\" is not a string");
      constexpr double kInf = std::numeric_limits<double>::infinity();
      if (name == "nan") {
        out = std::numeric_limits<double>::quiet_NaN();
      } else if (name == "inf" || name == "-inf") {
        out = name == "inf" ? kInf : -kInf;
      } else {
        return fail(path, "\"nonfinite\" is " + quote_for_message(name) + ", not nan, inf or -inf");
      }
      return Status::ok();
    }
    if (nonfinite) return fail(path, "\"nonfinite\" given with a numeric float value");
    std::int64_t i = 0;
    std::uint64_t u = 0;
    switch (value.type()) {
      case element_type::DOUBLE:
        out = value.get_double().value_unsafe();
        break;
      case element_type::INT64:
        i = value.get_int64().value_unsafe();
        out = static_cast<double>(i);
        break;
      case element_type::UINT64:
        u = value.get_uint64().value_unsafe();
        out = static_cast<double>(u);
        break;
      default:
        return fail(path, std::string("float value is ") + json_type_name(value.type()));
    }
    return Status::ok();
  }

  static Status read_python_type(element value, const std::string& path, std::string& out) {
    std::string_view text;
    if (value.get_string().get(text)) return fail(path, "\"python_type\" is not a string");
    if (text.empty()) return fail(path, "\"python_type\" is empty");
    out = text;
    return Status::ok();
  }

  static Status read_size(element value, const std::string& path, const char* name, std::uint64_t& out) {
    if (value.type() == element_type::INT64 && value.get_int64().value_unsafe() < 0) {
      return fail(path, std::string("\"") + name + "\" is negative");
    }
    if (value.get_uint64().get(out)) return fail(path, std::string("\"") + name + "\" is not an integer");
    return Status::ok();
  }

  Status read_tensor(const std::array<std::optional<element>, kMemberCount>& members, const std::string& path,
                     TensorTree& out) {
    out.kind = ValueKind::kTensor;
    std::string_view text;
    if (members[kDtype]->get_string().get(text)) return fail(path, "\"dtype\" is not a string");
    const std::optional<DType> dtype = dtype_from_name(text);
    if (!dtype) return fail(path, "unknown dtype " + quote_for_message(text));
    out.dtype = *dtype;

    simdjson::dom::array dims;
    if (members[kShape]->get_array().get(dims)) return fail(path, "\"shape\" is not an array");
    for (element dim : dims) {
      if (out.shape.size() == kMaxRank) return fail(path, "shape has more than 64 dimensions");
      std::int64_t n = 0;
      if (dim.type() == element_type::UINT64) return fail(path, "shape entry does not fit in int64");
      if (dim.get_int64().get(n)) return fail(path, "shape entry is not an integer");
      if (n < 0) return fail(path, "shape entry " + std::to_string(n) + " is negative");
      out.shape.push_back(n);
    }

    if (members[kDevice]->get_string().get(text)) return fail(path, "\"device\" is not a string");
    if (text != "cpu" && text != "cuda") return fail(path, "unknown device " + quote_for_message(text));
    out.device = text == "cpu" ? Device::kCpu : Device::kCuda;

    if (Status s = read_python_type(*members[kPythonType], path, out.python_type); !s) return s;

    std::uint64_t offset = 0;
    if (Status s = read_size(*members[kOffset], path, "offset", offset); !s) return s;
    if (Status s = read_size(*members[kNbytes], path, "nbytes", out.nbytes); !s) return s;

    const std::optional<std::uint64_t> needed = checked_nbytes(out.shape, out.dtype);
    if (!needed) {
      return fail(path, "shape " + shape_list(out.shape) + " " + std::string(dtype_name(out.dtype)) +
                            " overflows 64 bits");
    }
    if (*needed != out.nbytes) {
      return fail(path, "nbytes " + std::to_string(out.nbytes) + ", but shape " + shape_list(out.shape) +
                            " " + std::string(dtype_name(out.dtype)) + " needs " + std::to_string(*needed));
    }
    if (offset != next_offset_) {
      return fail(path, "offset " + std::to_string(offset) + ", expected " + std::to_string(next_offset_) +
                            " (tensors are packed in header order)");
    }
    if (out.nbytes > payload_size_ - offset) {
      return fail(path, "bytes at offset " + std::to_string(offset) + " (+" + std::to_string(out.nbytes) +
                            ") run past the end of the " + std::to_string(payload_size_) + "-byte payload");
    }
    next_offset_ = offset + out.nbytes;
    // Aliasing pointer: shares ownership of the mapping, points at this tensor's bytes.
    out.data = std::shared_ptr<const std::byte>(file_, file_->bytes() + payload_start_ + offset);
    return Status::ok();
  }

  const TensorFileLimits& limits_;
  std::shared_ptr<const MappedFile> file_;
  std::size_t payload_start_;
  std::uint64_t payload_size_;
  std::uint64_t next_offset_ = 0;
  std::size_t values_ = 0;
};

// Serialises a tree, checking it would read back: header JSON into `header`, tensor byte spans
// into `chunks` in header order.
class TreeWriter {
 public:
  TreeWriter(std::string& header, std::vector<std::span<const std::byte>>& chunks)
      : json_(header), chunks_(chunks) {}

  Status write(const TensorTree& value, int depth, std::string& path) {
    const TensorFileLimits limits;
    if (depth > limits.max_depth) return fail(path, "values nest deeper than the format allows");
    if (++values_ > limits.max_values) return fail(path, "more values than the format allows");
    json_.begin_object().field("kind", kind_name(value.kind));
    switch (value.kind) {
      case ValueKind::kTensor: {
        if (value.shape.size() > kMaxRank) return fail(path, "shape has more than 64 dimensions");
        const auto needed = checked_nbytes(value.shape, value.dtype);
        if (!needed) return fail(path, "shape " + shape_list(value.shape) + " is negative or overflows");
        if (*needed != value.nbytes) {
          return fail(path, "holds " + std::to_string(value.nbytes) + " bytes, but its shape needs " +
                                std::to_string(*needed));
        }
        if (value.nbytes != 0 && !value.data) return fail(path, "has no data");
        if (value.python_type.empty()) return fail(path, "python_type is empty");
        json_.field("dtype", dtype_name(value.dtype)).key("shape").begin_array();
        for (std::int64_t dim : value.shape) json_.value(dim);
        json_.end_array()
            .field("device", device_name(value.device))
            .field("python_type", std::string_view(value.python_type))
            .field("offset", static_cast<std::int64_t>(offset_))
            .field("nbytes", static_cast<std::int64_t>(value.nbytes));
        chunks_.push_back(value.bytes());
        offset_ += value.nbytes;
        break;
      }
      case ValueKind::kTuple:
      case ValueKind::kList: {
        json_.key("items").begin_array();
        for (std::size_t i = 0; i < value.items.size(); ++i) {
          const std::size_t saved = path.size();
          path += "[" + std::to_string(i) + "]";
          if (Status s = write(value.items[i], depth + 1, path); !s) return s;
          path.resize(saved);
        }
        json_.end_array();
        break;
      }
      case ValueKind::kDict: {
        if (value.keys.size() != value.items.size()) return fail(path, "keys and items differ in number");
        std::vector<std::string_view> sorted(value.keys.begin(), value.keys.end());
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
          return fail(path, "duplicate key");
        json_.key("items").begin_object();
        for (std::size_t i = 0; i < value.items.size(); ++i) {
          const std::size_t saved = path.size();
          append_path_key(path, value.keys[i]);
          json_.key(value.keys[i]);
          if (Status s = write(value.items[i], depth + 1, path); !s) return s;
          path.resize(saved);
        }
        json_.end_object();
        break;
      }
      case ValueKind::kInt:
        json_.field("value", value.int_value);
        break;
      case ValueKind::kFloat:
        write_float(value.float_value);
        break;
      case ValueKind::kBool:
        json_.field("value", value.bool_value);
        break;
      case ValueKind::kNone:
        break;
      case ValueKind::kOther:
        if (value.python_type.empty()) return fail(path, "python_type is empty");
        json_.field("python_type", std::string_view(value.python_type));
        break;
    }
    json_.end_object();
    return Status::ok();
  }

  std::uint64_t payload_size() const { return offset_; }

 private:
  static Status fail(const std::string& path, const std::string& reason) {
    return Status::error("cannot write " + path + ": " + reason);
  }

  void write_float(double number) {
    if (std::isnan(number)) {
      json_.key("value").null().field("nonfinite", "nan");
    } else if (std::isinf(number)) {
      json_.key("value").null().field("nonfinite", number > 0 ? "inf" : "-inf");
    } else {
      // to_chars writes 1.0 as "1" and -0.0 as "-0", which JSON readers take for integers and
      // would lose the sign of zero; a ".0" keeps it a float.
      std::string text;
      append_json_number(text, number);
      if (text.find_first_of(".eE") == std::string::npos) text += ".0";
      json_.key("value").raw(text);
    }
  }

  JsonWriter json_;
  std::vector<std::span<const std::byte>>& chunks_;
  std::uint64_t offset_ = 0;
  std::size_t values_ = 0;
};

Status write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(size, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::error(errno_text(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return Status::ok();
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                      DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kBool}) {
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 1;
}

bool dtype_is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat64;
}

std::string_view device_name(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

std::string_view kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor:
      return "tensor";
    case ValueKind::kTuple:
      return "tuple";
    case ValueKind::kList:
      return "list";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kNone:
      return "none";
    case ValueKind::kOther:
      return "other";
  }
  return "?";
}

std::string quote_for_message(std::string_view untrusted) {
  std::string out;
  const bool cut = untrusted.size() > kMessageTextCap;
  append_json_string(out, cut ? untrusted.substr(0, kMessageTextCap) : untrusted);
  if (cut) out += "...";
  return out;
}

void append_path_key(std::string& path, std::string_view key) {
  path += '[';
  path += quote_for_message(key);
  path += ']';
}

std::uint64_t TensorTree::numel() const {
  if (kind != ValueKind::kTensor) return 0;
  std::uint64_t total = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) {
      return std::numeric_limits<std::uint64_t>::max();
    }
  }
  return total;
}

TensorTree TensorTree::tensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes,
                              Device device, std::string python_type) {
  TensorTree tree;
  tree.kind = ValueKind::kTensor;
  tree.dtype = dtype;
  tree.shape = std::move(shape);
  tree.device = device;
  tree.python_type = std::move(python_type);
  tree.nbytes = bytes.size();
  auto owner = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  tree.data = std::shared_ptr<const std::byte>(owner, owner->data());
  return tree;
}

TensorTree TensorTree::tuple(std::vector<TensorTree> items) {
  TensorTree tree;
  tree.kind = ValueKind::kTuple;
  tree.items = std::move(items);
  return tree;
}

TensorTree TensorTree::list(std::vector<TensorTree> items) {
  TensorTree tree = tuple(std::move(items));
  tree.kind = ValueKind::kList;
  return tree;
}

TensorTree TensorTree::dict(std::vector<std::pair<std::string, TensorTree>> items) {
  TensorTree tree;
  tree.kind = ValueKind::kDict;
  for (auto& [key, value] : items) {
    tree.keys.push_back(std::move(key));
    tree.items.push_back(std::move(value));
  }
  return tree;
}

TensorTree TensorTree::integer(std::int64_t value) {
  TensorTree tree;
  tree.kind = ValueKind::kInt;
  tree.int_value = value;
  return tree;
}

TensorTree TensorTree::floating(double value) {
  TensorTree tree;
  tree.kind = ValueKind::kFloat;
  tree.float_value = value;
  return tree;
}

TensorTree TensorTree::boolean(bool value) {
  TensorTree tree;
  tree.kind = ValueKind::kBool;
  tree.bool_value = value;
  return tree;
}

TensorTree TensorTree::none() { return TensorTree(); }

TensorTree TensorTree::other(std::string python_type) {
  TensorTree tree;
  tree.kind = ValueKind::kOther;
  tree.python_type = std::move(python_type);
  return tree;
}

Result<TensorTree> read_tensor_file(const std::string& path, const TensorFileLimits& limits) {
  // O_NONBLOCK: a FIFO planted where the file should be must not hang the trusted side.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ELOOP) return Status::error("'" + path + "': is a symbolic link");
    return Status::error("cannot open '" + path + "': " + errno_text(errno));
  }
  return read_tensor_fd(fd.get(), path, limits);
}

Result<TensorTree> read_tensor_fd(int fd, const std::string& name, const TensorFileLimits& limits) {
  auto fail = [&](const std::string& reason) { return Status::error("'" + name + "': " + reason); };
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > limits.max_file_bytes) {
    return fail(std::to_string(size) + " bytes, over the " + std::to_string(limits.max_file_bytes) +
                "-byte cap");
  }
  if (size < kPreambleBytes) return fail("too short for a tensor file (" + std::to_string(size) + " bytes)");

  void* address = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) return fail("cannot map: " + errno_text(errno));
  auto file = std::make_shared<const MappedFile>(address, static_cast<std::size_t>(size));
  (void)::madvise(address, static_cast<std::size_t>(size), MADV_SEQUENTIAL);  // a hint; failure is harmless

  const std::byte* bytes = file->bytes();
  if (std::memcmp(bytes, kMagic.data(), kMagic.size()) != 0)
    return fail("bad magic (not a CATENS1 tensor file)");
  std::uint32_t header_size = 0;
  for (int i = 3; i >= 0; --i)
    header_size = (header_size << 8) | std::to_integer<std::uint32_t>(bytes[8 + i]);
  if (header_size == 0) return fail("empty header");
  if (header_size > limits.max_header_bytes) {
    return fail("header length " + std::to_string(header_size) + " is over the " +
                std::to_string(limits.max_header_bytes) + "-byte cap");
  }
  if (header_size > size - kPreambleBytes) {
    return fail("header length " + std::to_string(header_size) + " runs past the end of the file (" +
                std::to_string(size) + " bytes)");
  }

  // simdjson needs padding after the text, so the header (<= 1 MiB) is the one part copied.
  const simdjson::padded_string header(reinterpret_cast<const char*>(bytes + kPreambleBytes), header_size);
  simdjson::dom::parser parser;
  // A value at depth d sits at JSON depth 2d (its object inside an "items" container); its shape
  // array one deeper. simdjson's own limit backs up the reader's explicit check.
  const auto json_depth = static_cast<std::size_t>(std::max(limits.max_depth, 1)) * 2 + 2;
  if (parser.allocate(std::max<std::size_t>(header_size, 64), json_depth)) return fail("out of memory");
  element root;
  if (const auto error = parser.parse(header).get(root)) {
    if (error == simdjson::DEPTH_ERROR) {
      return fail("header: values nest deeper than " + std::to_string(limits.max_depth) + " levels");
    }
    return fail(std::string("header: invalid JSON: ") + simdjson::error_message(error));
  }
  TensorTree tree;
  HeaderReader reader(limits, file, kPreambleBytes + header_size);
  if (Status status = reader.read_root(root, tree); !status) return fail("header: " + status.message());
  return tree;
}

Status write_tensor_file(const std::string& path, const TensorTree& tree) {
  std::string header = "{\"value\":";
  std::vector<std::span<const std::byte>> chunks;
  TreeWriter writer(header, chunks);
  std::string value_path = "value";
  if (Status status = writer.write(tree, 1, value_path); !status)
    return status.with_context("'" + path + "'");
  header += '}';
  const TensorFileLimits limits;
  if (header.size() > limits.max_header_bytes) {
    return Status::error("'" + path + "': cannot write: header of " + std::to_string(header.size()) +
                         " bytes is over the format's cap");
  }
  if (kPreambleBytes + header.size() + writer.payload_size() > limits.max_file_bytes) {
    return Status::error("'" + path + "': cannot write: the file would be over the default reading cap");
  }

  std::string preamble(kMagic.begin(), kMagic.end());
  const auto header_size = static_cast<std::uint32_t>(header.size());
  for (int i = 0; i < 4; ++i) preamble.push_back(static_cast<char>((header_size >> (8 * i)) & 0xff));

  std::string temp = path + ".tmp-XXXXXX";
  FileDescriptor fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (fd.get() < 0) return Status::error("cannot create '" + temp + "': " + errno_text(errno));
  auto abandon = [&](const std::string& reason) {
    ::unlink(temp.c_str());
    return Status::error("cannot write '" + temp + "': " + reason);
  };
  Status status = write_all(fd.get(), preamble.data(), preamble.size());
  if (status) status = write_all(fd.get(), header.data(), header.size());
  for (const auto& chunk : chunks) {
    if (status) status = write_all(fd.get(), chunk.data(), chunk.size());
  }
  if (!status) return abandon(status.message());
  if (::close(fd.release()) != 0) return abandon(errno_text(errno));
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return Status::error("cannot rename '" + temp + "' to '" + path + "': " + errno_text(error));
  }
  return Status::ok();
}

}  // namespace cudaagent
