// The safetensors layout written and read with plain POSIX I/O: the header is built with the
// project's JSON writer and read with simdjson; tensor bytes are streamed straight from each CPU
// tensor, so a large optimiser state is never copied into one buffer.
#include "cudaagent/train/rl_tensor_io.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"

namespace cudaagent {
namespace {

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {at::kFloat, "F32"}, {at::kDouble, "F64"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},  {at::kInt, "I32"},    {at::kByte, "U8"},  {at::kBool, "BOOL"},
};

const char* dtype_label(at::ScalarType type) {
  for (const auto& entry : kDtypes) {
    if (entry.type == type) return entry.name;
  }
  return nullptr;
}

bool dtype_from_label(std::string_view label, at::ScalarType& type) {
  for (const auto& entry : kDtypes) {
    if (label == entry.name) {
      type = entry.type;
      return true;
    }
  }
  return false;
}

Status write_all(int fd, const void* data, std::size_t size, const std::string& path) {
  const auto* bytes = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::error("cannot write " + cudaagent::quoted(path) + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return Status::ok();
}

}  // namespace

at::Tensor NamedTensors::find(const std::string& name) const {
  for (const auto& [key, tensor] : tensors) {
    if (key == name) return tensor;
  }
  return {};
}

Status rl_write_tensors(const std::string& path, const NamedTensors& contents) {
  std::vector<at::Tensor> cpu;
  cpu.reserve(contents.tensors.size());
  std::string header;
  JsonWriter json(header);
  json.begin_object();
  if (!contents.metadata.empty()) {
    json.key("__metadata__").begin_object();
    for (const auto& [key, value] : contents.metadata) json.field(key, value);
    json.end_object();
  }
  std::set<std::string> names;
  std::int64_t offset = 0;
  for (const auto& [name, tensor] : contents.tensors) {
    if (name == "__metadata__" || !names.insert(name).second) {
      return Status::error("tensor name " + cudaagent::quoted(name) + " is reserved or repeated");
    }
    const char* label = dtype_label(tensor.scalar_type());
    if (label == nullptr)
      return Status::error("tensor " + cudaagent::quoted(name) + " has an unsupported dtype");
    at::Tensor host = tensor.detach().to(at::kCPU).contiguous();
    const auto nbytes = static_cast<std::int64_t>(host.nbytes());
    json.key(name).begin_object().field("dtype", label).key("shape").begin_array();
    for (std::int64_t size : host.sizes()) json.value(size);
    json.end_array().key("data_offsets").begin_array().value(offset).value(offset + nbytes);
    json.end_array().end_object();
    offset += nbytes;
    cpu.push_back(std::move(host));
  }
  json.end_object();
  // The format pads the header with spaces to a multiple of 8 bytes.
  while (header.size() % 8 != 0) header.push_back(' ');

  const std::string temp = temporary_sibling(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error("cannot create " + cudaagent::quoted(temp) + ": " + std::strerror(errno));
  std::uint8_t length[8];
  std::uint64_t header_size = header.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(header_size >> (8 * i));
  Status status = write_all(fd, length, sizeof length, temp);
  if (status) status = write_all(fd, header.data(), header.size(), temp);
  for (std::size_t i = 0; status && i < cpu.size(); ++i) {
    status = write_all(fd, cpu[i].data_ptr(), cpu[i].nbytes(), temp);
  }
  if (status && ::fsync(fd) != 0) status = Status::error("cannot sync " + cudaagent::quoted(temp));
  if (::close(fd) != 0 && status) status = Status::error("cannot close " + cudaagent::quoted(temp));
  if (status && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = Status::error("cannot rename " + cudaagent::quoted(temp) + " to " +
                           cudaagent::quoted(path) + ": " + std::strerror(errno));
  }
  if (!status) ::unlink(temp.c_str());
  return status;
}

Result<NamedTensors> rl_read_tensors(const std::string& path) {
  std::string bytes;
  if (!read_whole_file(path, bytes)) return Status::error("cannot read " + cudaagent::quoted(path));
  if (bytes.size() < 8)
    return Status::error(cudaagent::quoted(path) + ": too short for a tensor file");
  std::uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) {
    header_size |=
        static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)]))
        << (8 * i);
  }
  if (header_size > bytes.size() - 8)
    return Status::error(cudaagent::quoted(path) + ": header runs past the end");
  const std::size_t data_start = 8 + header_size;
  simdjson::dom::parser parser;
  simdjson::padded_string header(bytes.data() + 8, header_size);
  simdjson::dom::object root;
  if (parser.parse(header).get(root))
    return Status::error(cudaagent::quoted(path) + ": header is not a JSON object");
  NamedTensors out;
  for (auto field : root) {
    const std::string name(field.key);
    if (name == "__metadata__") {
      simdjson::dom::object metadata;
      if (field.value.get_object().get(metadata))
        return Status::error(cudaagent::quoted(path) + ": bad __metadata__");
      for (auto entry : metadata) {
        std::string_view value;
        if (entry.value.get_string().get(value))
          return Status::error(cudaagent::quoted(path) + ": bad __metadata__");
        out.metadata[std::string(entry.key)] = std::string(value);
      }
      continue;
    }
    const std::string what = cudaagent::quoted(path) + ": tensor " + cudaagent::quoted(name);
    std::string_view label;
    at::ScalarType type{};
    simdjson::dom::array shape_items;
    simdjson::dom::array offsets;
    if (field.value["dtype"].get_string().get(label) || !dtype_from_label(label, type) ||
        field.value["shape"].get_array().get(shape_items) ||
        field.value["data_offsets"].get_array().get(offsets) || offsets.size() != 2) {
      return Status::error(what + ": bad entry");
    }
    std::vector<std::int64_t> shape;
    std::int64_t numel = 1;
    for (auto item : shape_items) {
      std::int64_t size = 0;
      if (item.get_int64().get(size) || size < 0) return Status::error(what + ": bad shape");
      shape.push_back(size);
      numel *= size;
    }
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    if (offsets.at(0).get_uint64().get(begin) || offsets.at(1).get_uint64().get(end) ||
        end < begin || end > bytes.size() - data_start) {
      return Status::error(what + ": bad data offsets");
    }
    at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type));
    if (tensor.nbytes() != end - begin)
      return Status::error(what + ": size does not match its shape");
    if (numel > 0) std::memcpy(tensor.data_ptr(), bytes.data() + data_start + begin, end - begin);
    out.tensors.emplace_back(name, std::move(tensor));
  }
  return out;
}

}  // namespace cudaagent
