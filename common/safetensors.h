// Memory-mapped reader for Hugging Face safetensors files, single or sharded.
// Tensors are views into the mapping: nothing is copied, pages load on first touch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace llm {

// A read-only view of one tensor inside a mapped file. Valid while its SafetensorsFile lives.
struct TensorView {
  std::string name;
  std::string file;  // path of the file it lives in, for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  std::string ShapeString() const;  // "[64, 512]"
};

// One mapped .safetensors file. The header is validated on open: every tensor's byte range
// must lie inside the file and match its dtype and shape.
class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  std::vector<std::string> TensorNames() const;
  bool Has(const std::string& name) const { return entries_.count(name) != 0; }
  // NotFound if absent, Unimplemented if its dtype is not F32/F16/BF16.
  StatusOr<TensorView> Get(const std::string& name) const;
  // Tells the kernel the pages of this tensor may be dropped from memory (after a copy).
  void Release(const TensorView& view) const;
  // The same for any byte range; false (and nothing done) unless it lies inside this file's
  // mapping.
  bool ReleaseRange(const void* data, size_t bytes) const;

 private:
  struct Entry {
    std::string dtype;  // as written in the header
    std::vector<int64_t> shape;
    size_t begin = 0;  // byte offsets relative to the data section
    size_t end = 0;
  };
  SafetensorsFile() = default;
  Status ParseHeader();

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  size_t data_offset_ = 0;
  std::map<std::string, Entry> entries_;
};

// The weights of a model folder: model.safetensors, or the shards named by
// model.safetensors.index.json.
class ModelWeightFiles {
 public:
  static StatusOr<std::unique_ptr<ModelWeightFiles>> Open(const std::string& dir);

  std::vector<std::string> TensorNames() const;
  bool Has(const std::string& name) const { return where_.count(name) != 0; }
  StatusOr<TensorView> Get(const std::string& name) const;
  void Release(const TensorView& view) const;
  // Releases the pages of a byte range inside one of the files (a tensor's rows, after a copy
  // of them was made); false if the range is in none of them.
  bool ReleaseRange(const void* data, size_t bytes) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace llm
