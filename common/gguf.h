// Memory-mapped reader for GGUF files (llama.cpp's single-file model format, versions 2 and 3):
// the header, every metadata key/value (all value types, arrays nested), the tensor infos and
// the data section. Everything is validated on open, with 64-bit arithmetic: counts, string and
// array lengths against the bytes left in the file, array nesting, tensor ranks (at most 4),
// shapes (no overflow, rows a whole number of blocks), types (known GGML types only), offsets
// (aligned, inside the file). A bad file is a Status naming the file and the key or tensor at
// fault, never a crash. Tensor data are views into the mapping: nothing is copied.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace llm {

// GGUF metadata value types (gguf.h's gguf_type).
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* GgufTypeName(GgufType t);

// The GGML tensor types this reader knows (ggml.h's ggml_type), with their block layout.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
};
struct GgmlTypeInfo {
  const char* name;    // "Q8_0"
  int64_t block_size;  // elements per block
  int64_t type_size;   // bytes per block
};
// nullptr for a type id GGML does not define (or has removed).
const GgmlTypeInfo* GgmlTypeInfoOf(uint32_t type);

// One metadata value. Scalars: integers and bools in `bits` (signed ones sign-extended), floats
// in `f`, strings in `str`. Arrays: `elem_type` and the elements in `ints` (integers, bools),
// `floats`, `strings` or `arrays` (nested arrays), whichever the element type uses.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  uint64_t bits = 0;
  double f = 0;
  std::string str;
  GgufType elem_type = GgufType::kUint8;
  std::vector<uint64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<GgufValue> arrays;

  bool is_integer() const;  // an integer scalar type (not bool)
  uint64_t array_size() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGML order: dims[0] is the row length (contiguous elements)
  uint32_t type = 0;
  const GgmlTypeInfo* type_info = nullptr;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  const void* data = nullptr;  // into the mapping

  int64_t numel() const;
  std::string ShapeString() const;  // "[64, 512]" (GGML order)
  std::string TypeName() const;     // "Q8_0"
};

class GgufFile {
 public:
  // Maps and validates `path`.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Validates an image in memory (not copied: it must outlive the GgufFile); `name` stands for
  // the file in errors.
  static StatusOr<std::unique_ptr<GgufFile>> FromMemory(const void* data, size_t size,
                                                        const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed access. NotFound naming the file and key when absent; InvalidArgument when the value
  // has another type or does not fit.
  StatusOr<std::string> GetString(const std::string& key) const;
  StatusOr<int64_t> GetInt(const std::string& key) const;   // any integer type
  StatusOr<double> GetFloat(const std::string& key) const;  // float32/64 or an integer
  StatusOr<bool> GetBool(const std::string& key) const;
  StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  StatusOr<std::vector<double>> GetFloatArray(const std::string& key) const;

  // Drops this process's pages of [data, data + bytes) when the range lies in the file's mapping
  // (a tensor a backend copied elsewhere): they read back from the file if touched again. A
  // no-op for FromMemory images and ranges outside the mapping.
  void ReleasePages(const void* data, size_t bytes) const;

 private:
  GgufFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // owned mapping (Open), or nullptr (FromMemory)
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// True when `path` is a regular file that is a GGUF model: its name ends in ".gguf" or it starts
// with the GGUF magic. (A folder is a Hugging Face model folder.)
bool IsGgufPath(const std::string& path);

}  // namespace llm
