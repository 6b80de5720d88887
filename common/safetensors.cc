#include "common/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/mapped_pages.h"

namespace llm {

using nlohmann::json;

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return DataLoss(path + ": cannot stat: " + std::strerror(errno));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_size_ = static_cast<size_t>(st.st_size);
  if (file->map_size_ < 8) {
    ::close(fd);
    return DataLoss(path + ": file is " + std::to_string(st.st_size) +
                    " bytes, too short for a safetensors header");
  }
  void* map = ::mmap(nullptr, file->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return DataLoss(path + ": mmap failed: " + std::strerror(errno));
  file->map_ = map;
  LLM_RETURN_IF_ERROR(file->ParseHeader());
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

static size_t SafetensorsDTypeSize(const std::string& dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  return 0;
}

Status SafetensorsFile::ParseHeader() {
  uint64_t header_len = 0;
  std::memcpy(&header_len, map_, 8);
  if (header_len > map_size_ - 8) {
    return DataLoss(path_ + ": header claims " + std::to_string(header_len) +
                    " bytes but the file has " + std::to_string(map_size_) +
                    " (truncated or not a safetensors file)");
  }
  data_offset_ = 8 + header_len;
  const size_t data_size = map_size_ - data_offset_;
  json header = json::parse(static_cast<const char*>(map_) + 8,
                            static_cast<const char*>(map_) + data_offset_, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return DataLoss(path_ + ": header is not a JSON object");
  }
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path_ + ": tensor '" + name + "'";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets") || !info["dtype"].is_string() || !info["shape"].is_array() ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      return DataLoss(where + ": malformed header entry");
    }
    Entry e;
    e.dtype = info["dtype"].get<std::string>();
    size_t numel = 1;
    if (info["shape"].size() > 8) return DataLoss(where + ": shape has more than 8 dimensions");
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned()) return DataLoss(where + ": shape has a non-integer dimension");
      // The element count must fit the data section, so any product past it is an error
      // (and never a wrapped-around size that happens to match the byte range).
      const uint64_t dim = d.get<uint64_t>();
      if (dim > data_size || __builtin_mul_overflow(numel, dim, &numel) || numel > data_size) {
        return DataLoss(where + ": shape " + info["shape"].dump() +
                        " has more elements than the file's " + std::to_string(data_size) +
                        " bytes of data");
      }
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return DataLoss(where + ": data_offsets are not integers");
    }
    e.begin = off[0].get<size_t>();
    e.end = off[1].get<size_t>();
    if (e.begin > e.end || e.end > data_size) {
      return DataLoss(where + ": bytes [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                      ") lie outside the data section of " + std::to_string(data_size) +
                      " bytes (truncated file?)");
    }
    size_t elem = SafetensorsDTypeSize(e.dtype);
    if (elem != 0 && numel * elem != e.end - e.begin) {
      return DataLoss(where + ": " + std::to_string(e.end - e.begin) + " bytes do not match " +
                      e.dtype + " with " + std::to_string(numel) + " elements");
    }
    entries_.emplace(name, std::move(e));
  }
  return Status::Ok();
}

std::vector<std::string> SafetensorsFile::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, e] : entries_) names.push_back(name);
  return names;
}

StatusOr<TensorView> SafetensorsFile::Get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return NotFound(path_ + ": no tensor '" + name + "'");
  const Entry& e = it->second;
  TensorView v;
  if (!ParseDType(e.dtype, &v.dtype)) {
    return Unimplemented(path_ + ": tensor '" + name + "' has dtype " + e.dtype +
                         " (supported: F32, F16, BF16)");
  }
  v.name = name;
  v.file = path_;
  v.shape = e.shape;
  v.data = static_cast<const char*>(map_) + data_offset_ + e.begin;
  v.nbytes = e.end - e.begin;
  return v;
}

void SafetensorsFile::Release(const TensorView& view) const {
  ReleaseRange(view.data, view.nbytes);
}

bool SafetensorsFile::ReleaseRange(const void* data, size_t bytes) const {
  return ReleaseMappedPages(map_, map_size_, data, bytes);
}

StatusOr<std::unique_ptr<ModelWeightFiles>> ModelWeightFiles::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  auto files = std::make_unique<ModelWeightFiles>();
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  json weight_map;
  if (fs::exists(index)) {
    std::ifstream in(index);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return DataLoss(index.string() + ": not valid JSON with a \"weight_map\" object");
    }
    weight_map = j["weight_map"];
    std::set<std::string> unique;
    for (auto& [tensor, shard] : weight_map.items()) {
      if (!shard.is_string()) return DataLoss(index.string() + ": weight_map['" + tensor + "']");
      unique.insert(shard.get<std::string>());
    }
    shard_names.assign(unique.begin(), unique.end());
  } else if (fs::exists(single)) {
    shard_names.push_back("model.safetensors");
  } else {
    return NotFound(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& shard : shard_names) {
    LLM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((fs::path(dir) / shard).string()));
    for (const auto& name : f->TensorNames()) {
      if (!weight_map.is_null() && (!weight_map.contains(name) || weight_map[name] != shard)) {
        continue;  // the index is authoritative for sharded models
      }
      if (files->where_.count(name)) {
        return DataLoss(f->path() + ": tensor '" + name + "' also appears in another shard");
      }
      files->where_[name] = f.get();
    }
    files->files_.push_back(std::move(f));
  }
  if (!weight_map.is_null()) {
    for (auto& [tensor, shard] : weight_map.items()) {
      if (!files->where_.count(tensor)) {
        return DataLoss(index.string() + ": tensor '" + tensor + "' is listed for " +
                        shard.get<std::string>() + " but that file does not contain it");
      }
    }
  }
  return files;
}

std::vector<std::string> ModelWeightFiles::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, f] : where_) names.push_back(name);
  return names;
}

StatusOr<TensorView> ModelWeightFiles::Get(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return NotFound("no tensor '" + name + "' in the model's safetensors");
  return it->second->Get(name);
}

void ModelWeightFiles::Release(const TensorView& view) const {
  auto it = where_.find(view.name);
  if (it != where_.end()) it->second->Release(view);
}

bool ModelWeightFiles::ReleaseRange(const void* data, size_t bytes) const {
  for (const auto& f : files_) {
    if (f->ReleaseRange(data, bytes)) return true;
  }
  return false;
}

}  // namespace llm
