// Safetensors reading (mmap + simdjson over the header) and writing (temporary file, rename). The
// header of a file we did not write is untrusted input: every offset and size is checked against
// the file before a view is handed out.
#include "cudaagent/train/safetensors.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "cudaagent/base/errno_text.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/session.h"

namespace cudaagent::train {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeName {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::kF64, "F64", 8}, {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2}, {DType::kI8, "I8", 1}, {DType::kU8, "U8", 1}, {DType::kBool, "BOOL", 1},
};

// A read-only mapping of a whole file.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::error("cannot open " + cudaagent::quoted(path) + ": " + errno_text(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::error(cudaagent::quoted(path) + " is not a regular file");
    }
    auto file = std::unique_ptr<MappedFile>(new MappedFile());
    file->size_ = static_cast<std::size_t>(st.st_size);
    if (file->size_ > 0) {
      void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        return Status::error("cannot map " + cudaagent::quoted(path) + ": " + errno_text(errno));
      }
      file->data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping stays valid without the descriptor
    return file;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

struct OpenFile {
  std::string path;
  std::unique_ptr<MappedFile> mapping;
  std::uint64_t data_start = 0;
  std::vector<TensorInfo> tensors;
};

Status parse_header(OpenFile& file) {
  const auto bytes = file.mapping->bytes();
  const auto fail = [&](const std::string& why) { return Status::error(cudaagent::quoted(file.path) + ": " + why); };
  if (bytes.size() < 8) return fail("shorter than a safetensors header");
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  if (header_size > kMaxHeaderBytes || header_size > bytes.size() - 8) return fail("header length beyond the file");
  file.data_start = 8 + header_size;
  const std::uint64_t data_size = bytes.size() - file.data_start;
  simdjson::dom::parser parser;
  simdjson::dom::object header;
  if (auto error = parser.parse(reinterpret_cast<const char*>(bytes.data() + 8), header_size).get(header); error) {
    return fail(std::string("header is not a JSON object: ") + simdjson::error_message(error));
  }
  for (auto field : header) {
    if (field.key == "__metadata__") continue;
    TensorInfo info;
    info.name = field.key;
    std::string_view dtype;
    simdjson::dom::array shape, offsets;
    if (field.value["dtype"].get(dtype) != simdjson::SUCCESS || field.value["shape"].get(shape) != simdjson::SUCCESS ||
        field.value["data_offsets"].get(offsets) != simdjson::SUCCESS || offsets.size() != 2) {
      return fail("tensor '" + info.name + "' lacks dtype, shape or data_offsets");
    }
    const auto parsed = parse_dtype(dtype);
    if (!parsed) return fail("tensor '" + info.name + "' has dtype '" + std::string(dtype) + "', not supported");
    info.dtype = *parsed;
    for (simdjson::dom::element d : shape) {
      std::int64_t extent = 0;
      if (d.get(extent) != simdjson::SUCCESS || extent < 0) return fail("tensor '" + info.name + "' has a bad shape");
      info.shape.push_back(extent);
    }
    if (offsets.at(0).get(info.begin) != simdjson::SUCCESS || offsets.at(1).get(info.end) != simdjson::SUCCESS ||
        info.begin > info.end || info.end > data_size) {
      return fail("tensor '" + info.name + "' has data offsets beyond the file");
    }
    if (info.end - info.begin != static_cast<std::uint64_t>(info.numel()) * dtype_size(info.dtype)) {
      return fail("tensor '" + info.name + "' has a byte size that does not match its shape");
    }
    file.tensors.push_back(std::move(info));
  }
  return Status::ok();
}

Status write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
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
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

std::uint64_t TensorToWrite::byte_size() const {
  std::uint64_t n = dtype_size(dtype);
  for (const std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

struct Checkpoint::Impl {
  std::vector<OpenFile> files;
  std::vector<std::string> paths;
  std::map<std::string, std::pair<std::size_t, std::size_t>, std::less<>> index;  // name -> (file, tensor)
};

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  std::vector<std::string> paths;
  std::error_code ignored;
  if (!std::filesystem::is_directory(path, ignored)) {
    paths.push_back(path);
  } else if (const std::string index = path + "/model.safetensors.index.json";
             std::filesystem::is_regular_file(index, ignored)) {
    simdjson::dom::parser parser;
    simdjson::dom::object weight_map;
    if (auto error = parser.load(index)["weight_map"].get(weight_map); error) {
      return Status::error(cudaagent::quoted(index) + ": no weight_map: " + simdjson::error_message(error));
    }
    for (auto field : weight_map) {
      std::string_view shard;
      if (field.value.get(shard) != simdjson::SUCCESS || shard.find('/') != std::string_view::npos) {
        return Status::error(cudaagent::quoted(index) + ": bad shard name for '" + std::string(field.key) + "'");
      }
      const std::string shard_path = path + "/" + std::string(shard);
      if (std::find(paths.begin(), paths.end(), shard_path) == paths.end()) paths.push_back(shard_path);
    }
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(path + "/model.safetensors");
  }
  auto impl = std::make_unique<Impl>();
  impl->paths = paths;
  for (const std::string& file_path : paths) {
    auto mapping = MappedFile::open(file_path);
    if (!mapping) return mapping.status();
    OpenFile file{file_path, std::move(mapping).value(), 0, {}};
    if (Status s = parse_header(file); !s) return s;
    impl->files.push_back(std::move(file));
  }
  for (std::size_t f = 0; f < impl->files.size(); ++f) {
    for (std::size_t t = 0; t < impl->files[f].tensors.size(); ++t) {
      const std::string& name = impl->files[f].tensors[t].name;
      if (!impl->index.emplace(name, std::make_pair(f, t)).second) {
        return Status::error("tensor '" + name + "' is in more than one file of " + cudaagent::quoted(path));
      }
    }
  }
  return Checkpoint(std::move(impl));
}

std::optional<TensorView> Checkpoint::find(std::string_view name) const {
  const auto it = impl_->index.find(name);
  if (it == impl_->index.end()) return std::nullopt;
  const OpenFile& file = impl_->files[it->second.first];
  const TensorInfo& info = file.tensors[it->second.second];
  const auto bytes = file.mapping->bytes().subspan(file.data_start + info.begin, info.end - info.begin);
  return TensorView{&info, bytes};
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, where] : impl_->index) out.push_back(name);
  return out;
}

const std::vector<std::string>& Checkpoint::files() const { return impl_->paths; }

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string header;
  JsonWriter w(header);
  w.begin_object();
  if (!metadata.empty()) {
    w.key("__metadata__").begin_object();
    for (const auto& [key, value] : metadata) w.field(key, value);
    w.end_object();
  }
  std::uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    w.key(t.name).begin_object().field("dtype", dtype_name(t.dtype)).key("shape").begin_array();
    for (const std::int64_t d : t.shape) w.value(d);
    w.end_array().key("data_offsets").begin_array().value(static_cast<std::int64_t>(offset));
    offset += t.byte_size();
    w.value(static_cast<std::int64_t>(offset)).end_array().end_object();
  }
  w.end_object();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  const std::string temporary = temporary_sibling(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::error("cannot create " + cudaagent::quoted(temporary) + ": " + errno_text(errno));
  }
  const auto fail = [&](const Status& s) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return s.with_context("writing " + cudaagent::quoted(path));
  };
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((header.size() >> (8 * i)) & 0xFF);
  if (Status s = write_all(fd, length, 8); !s) return fail(s);
  if (Status s = write_all(fd, header.data(), header.size()); !s) return fail(s);
  std::vector<std::byte> buffer;
  for (const TensorToWrite& t : tensors) {
    buffer.resize(t.byte_size());
    if (!buffer.empty()) t.fill(buffer.data());
    if (Status s = write_all(fd, buffer.data(), buffer.size()); !s) return fail(s);
  }
  if (::fsync(fd) != 0) return fail(Status::error(errno_text(errno)));
  if (::close(fd) != 0) {
    ::unlink(temporary.c_str());
    return Status::error("writing " + cudaagent::quoted(path) + ": " + errno_text(errno));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return Status::error("cannot rename to " + cudaagent::quoted(path) + ": " + errno_text(errno));
  }
  return Status::ok();
}

Status write_checkpoint_weights(const std::string& dir, std::vector<TensorToWrite> tensors,
                                std::uint64_t max_shard_bytes) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::vector<TensorToWrite>> shards(1);
  std::uint64_t shard_bytes = 0, total = 0;
  for (TensorToWrite& t : tensors) {
    const std::uint64_t size = t.byte_size();
    if (!shards.back().empty() && shard_bytes + size > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += size;
    total += size;
    shards.back().push_back(std::move(t));
  }
  const std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}};
  if (shards.size() == 1) return write_safetensors(dir + "/model.safetensors", shards[0], metadata);

  std::string index;
  JsonWriter w(index);
  w.begin_object().key("metadata").begin_object().field("total_size", static_cast<std::int64_t>(total));
  w.end_object().key("weight_map").begin_object();
  const auto count = shards.size();
  for (std::size_t i = 0; i < count; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, count);
    if (Status s = write_safetensors(dir + "/" + name, shards[i], metadata); !s) return s;
    for (const TensorToWrite& t : shards[i]) w.field(t.name, std::string_view(name));
  }
  w.end_object().end_object();
  index.push_back('\n');
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!write_file_atomically(index_path, index)) return Status::error("cannot write " + cudaagent::quoted(index_path));
  return Status::ok();
}

}  // namespace cudaagent::train
