#include "common/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "common/mapped_pages.h"

namespace llm {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxNesting = 8;           // arrays of arrays of ...
// Every array element costs at most 8 bytes of memory per byte of file (a uint8 stored as a
// uint64), and at least one byte of file; this caps the total (1 GiB of parsed arrays).
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 27;
constexpr uint64_t kMaxKeyLength = 65536;

struct TypeEntry {
  uint32_t id;
  GgmlTypeInfo info;
};

// ggml.c's type_traits (block size, bytes per block) for every type GGML defines.
constexpr TypeEntry kGgmlTypes[] = {
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},      {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}},  {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},  {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},   {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},    {40, {"NVFP4", 64, 36}},
    {41, {"Q1_0", 128, 18}},
};

// Bytes one element of a fixed-size value type takes in the file (0: string or array).
uint64_t FixedSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool KnownValueType(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::kFloat64);
}

// A bounds-checked little-endian cursor over the file image.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  bool Skip(uint64_t n) {
    if (n > left()) return false;
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Read(T* out) {
    if (sizeof(T) > left()) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));  // x86-64 and aarch64 are little-endian
    pos_ += sizeof(T);
    return true;
  }
  bool ReadString(std::string* out) {
    uint64_t n = 0;
    if (!Read(&n) || n > left()) return false;
    out->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

class Parser {
 public:
  Parser(Cursor* c, const std::string& path) : c_(*c), path_(path) {}

  Status Truncated(const std::string& what) const {
    return DataLoss(path_ + ": truncated at byte " + std::to_string(c_.pos()) + " reading " + what);
  }

  // Reads one value of `type` (already known to be valid) into `out`.
  Status Value(GgufType type, const std::string& key, int depth, GgufValue* out) {
    out->type = type;
    switch (type) {
      case GgufType::kString:
        if (!c_.ReadString(&out->str)) return Truncated("the string value of key '" + key + "'");
        return Status::Ok();
      case GgufType::kArray:
        return Array(key, depth, out);
      case GgufType::kFloat32: {
        float v = 0;
        if (!c_.Read(&v)) return Truncated("key '" + key + "'");
        out->f = v;
        return Status::Ok();
      }
      case GgufType::kFloat64:
        if (!c_.Read(&out->f)) return Truncated("key '" + key + "'");
        return Status::Ok();
      default:
        return Integer(type, key, &out->bits);
    }
  }

 private:
  Status Integer(GgufType type, const std::string& key, uint64_t* out) {
    bool ok = false;
    switch (type) {
      case GgufType::kUint8:
      case GgufType::kBool: {
        uint8_t v = 0;
        ok = c_.Read(&v);
        *out = v;
        if (ok && type == GgufType::kBool && v > 1) {
          return InvalidArgument(path_ + ": key '" + key + "': bool value " + std::to_string(v) +
                                 " is neither 0 nor 1");
        }
        break;
      }
      case GgufType::kInt8: {
        int8_t v = 0;
        ok = c_.Read(&v);
        *out = static_cast<uint64_t>(static_cast<int64_t>(v));
        break;
      }
      case GgufType::kUint16: {
        uint16_t v = 0;
        ok = c_.Read(&v);
        *out = v;
        break;
      }
      case GgufType::kInt16: {
        int16_t v = 0;
        ok = c_.Read(&v);
        *out = static_cast<uint64_t>(static_cast<int64_t>(v));
        break;
      }
      case GgufType::kUint32: {
        uint32_t v = 0;
        ok = c_.Read(&v);
        *out = v;
        break;
      }
      case GgufType::kInt32: {
        int32_t v = 0;
        ok = c_.Read(&v);
        *out = static_cast<uint64_t>(static_cast<int64_t>(v));
        break;
      }
      case GgufType::kUint64:
      case GgufType::kInt64:
        ok = c_.Read(out);
        break;
      default:
        break;
    }
    return ok ? Status::Ok() : Truncated("key '" + key + "'");
  }

  Status Array(const std::string& key, int depth, GgufValue* out) {
    if (depth >= kMaxNesting) {
      return InvalidArgument(path_ + ": key '" + key + "': arrays nested deeper than " +
                             std::to_string(kMaxNesting));
    }
    uint32_t et = 0;
    uint64_t n = 0;
    if (!c_.Read(&et) || !c_.Read(&n)) return Truncated("the array header of key '" + key + "'");
    if (!KnownValueType(et)) {
      return InvalidArgument(path_ + ": key '" + key + "': unknown array element type " +
                             std::to_string(et));
    }
    const auto type = static_cast<GgufType>(et);
    out->elem_type = type;
    // Every element takes at least one byte (strings and arrays: an 8-byte length), so a count
    // beyond the bytes left is a truncated or corrupt file; checked before anything is reserved.
    const uint64_t min_size =
        FixedSize(type) ? FixedSize(type) : (type == GgufType::kArray ? 12 : 8);
    if (n > c_.left() / min_size) {
      return DataLoss(path_ + ": key '" + key + "': array of " + std::to_string(n) + " " +
                      GgufTypeName(type) + " elements does not fit in the " +
                      std::to_string(c_.left()) + " bytes left in the file");
    }
    elements_ += n;
    if (elements_ > kMaxArrayElements) {
      return InvalidArgument(path_ + ": key '" + key + "': more than " +
                             std::to_string(kMaxArrayElements) + " array elements in the metadata");
    }
    switch (type) {
      case GgufType::kString:
        out->strings.resize(n);
        for (uint64_t i = 0; i < n; ++i) {
          if (!c_.ReadString(&out->strings[i])) {
            return Truncated("element " + std::to_string(i) + " of key '" + key + "'");
          }
        }
        break;
      case GgufType::kArray:
        out->arrays.resize(n);
        for (uint64_t i = 0; i < n; ++i) {
          LLM_RETURN_IF_ERROR(Array(key, depth + 1, &out->arrays[i]));
          out->arrays[i].type = GgufType::kArray;
        }
        break;
      case GgufType::kFloat32:
      case GgufType::kFloat64:
        out->floats.resize(n);
        for (uint64_t i = 0; i < n; ++i) {
          if (type == GgufType::kFloat32) {
            float v = 0;
            c_.Read(&v);  // fits: checked above
            out->floats[i] = v;
          } else {
            c_.Read(&out->floats[i]);
          }
        }
        break;
      default:
        out->ints.resize(n);
        for (uint64_t i = 0; i < n; ++i) LLM_RETURN_IF_ERROR(Integer(type, key, &out->ints[i]));
        break;
    }
    return Status::Ok();
  }

  Cursor& c_;
  const std::string& path_;
  uint64_t elements_ = 0;
};

}  // namespace

const char* GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "?";
}

const GgmlTypeInfo* GgmlTypeInfoOf(uint32_t type) {
  for (const auto& e : kGgmlTypes) {
    if (e.id == type) return &e.info;
  }
  return nullptr;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

uint64_t GgufValue::array_size() const {
  if (type != GgufType::kArray) return 0;
  switch (elem_type) {
    case GgufType::kString:
      return strings.size();
    case GgufType::kArray:
      return arrays.size();
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return floats.size();
    default:
      return ints.size();
  }
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // validated on open: no overflow
  return n;
}

std::string GgufTensorInfo::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string GgufTensorInfo::TypeName() const {
  return type_info ? type_info->name : "type " + std::to_string(type);
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file");
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return DataLoss(path + ": mmap failed: " + std::strerror(err));
    }
    file->map_ = map;
    file->base_ = static_cast<const uint8_t*>(map);
  }
  ::close(fd);
  LLM_RETURN_IF_ERROR(file->Parse());
  return file;
}

void GgufFile::ReleasePages(const void* data, size_t bytes) const {
  ReleaseMappedPages(map_ != nullptr ? base_ : nullptr, size_, data, bytes);
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromMemory(const void* data, size_t size,
                                                         const std::string& name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = name;
  file->base_ = static_cast<const uint8_t*>(data);
  file->size_ = size;
  LLM_RETURN_IF_ERROR(file->Parse());
  return file;
}

GgufFile::~GgufFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

Status GgufFile::Parse() {
  Cursor c(base_, size_);
  Parser p(&c, path_);
  uint32_t magic = 0;
  if (!c.Read(&magic) || magic != kMagic) {
    return InvalidArgument(path_ + ": not a GGUF file (the first 4 bytes are not \"GGUF\")");
  }
  if (!c.Read(&version_)) return p.Truncated("the version");
  if (version_ != 2 && version_ != 3) {
    const bool swapped = version_ == 0x02000000u || version_ == 0x03000000u;
    return Unimplemented(path_ + ": GGUF version " + std::to_string(version_) +
                         (swapped ? " (a big-endian file)" : "") +
                         " is not supported (2 and 3 are)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(&n_tensors) || !c.Read(&n_kv)) return p.Truncated("the header");
  // A key/value takes at least 8 + 4 + 1 bytes and a tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13 || n_tensors > c.left() / 32) {
    return DataLoss(path_ + ": header declares " + std::to_string(n_tensors) + " tensors and " +
                    std::to_string(n_kv) + " metadata keys, more than the file's " +
                    std::to_string(size_) + " bytes can hold");
  }
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    if (!c.ReadString(&key)) return p.Truncated("the name of metadata key " + std::to_string(i));
    if (key.size() > kMaxKeyLength) {
      return InvalidArgument(path_ + ": metadata key " + std::to_string(i) + " is " +
                             std::to_string(key.size()) + " bytes long");
    }
    uint32_t type = 0;
    if (!c.Read(&type)) return p.Truncated("the type of key '" + key + "'");
    if (!KnownValueType(type)) {
      return InvalidArgument(path_ + ": key '" + key + "' has unknown value type " +
                             std::to_string(type));
    }
    if (kv_.count(key)) return InvalidArgument(path_ + ": duplicate metadata key '" + key + "'");
    GgufValue v;
    LLM_RETURN_IF_ERROR(p.Value(static_cast<GgufType>(type), key, 0, &v));
    kv_.emplace(key, std::move(v));
  }
  if (const GgufValue* a = Find("general.alignment")) {
    if (a->type != GgufType::kUint32 || a->bits == 0 || (a->bits & (a->bits - 1)) != 0) {
      return InvalidArgument(path_ + ": key 'general.alignment' must be a uint32 power of two");
    }
    alignment_ = a->bits;
  }
  tensors_.resize(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo& t = tensors_[i];
    if (!c.ReadString(&t.name)) return p.Truncated("the name of tensor " + std::to_string(i));
    uint32_t n_dims = 0;
    if (!c.Read(&n_dims)) return p.Truncated("the rank of tensor '" + t.name + "'");
    if (n_dims > kMaxDims) {
      return InvalidArgument(path_ + ": tensor '" + t.name + "' has " + std::to_string(n_dims) +
                             " dimensions (at most " + std::to_string(kMaxDims) + ")");
    }
    t.dims.resize(n_dims);
    for (auto& d : t.dims) {
      uint64_t v = 0;
      if (!c.Read(&v)) return p.Truncated("the shape of tensor '" + t.name + "'");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument(path_ + ": tensor '" + t.name + "' has a negative dimension");
      }
      d = static_cast<int64_t>(v);
    }
    if (!c.Read(&t.type) || !c.Read(&t.offset)) {
      return p.Truncated("the type and offset of tensor '" + t.name + "'");
    }
    t.type_info = GgmlTypeInfoOf(t.type);
    if (t.type_info == nullptr) {
      return InvalidArgument(path_ + ": tensor '" + t.name + "' has unknown GGML type " +
                             std::to_string(t.type));
    }
    int64_t numel = 1;
    for (int64_t d : t.dims) {
      if (__builtin_mul_overflow(numel, d, &numel)) {
        return InvalidArgument(path_ + ": tensor '" + t.name + "': shape " + t.ShapeString() +
                               " overflows 64 bits");
      }
    }
    const int64_t block = t.type_info->block_size;
    if (!t.dims.empty() && t.dims[0] % block != 0) {
      return InvalidArgument(path_ + ": tensor '" + t.name + "' (" + t.TypeName() +
                             "): row length " + std::to_string(t.dims[0]) +
                             " is not a multiple of the block size " + std::to_string(block));
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(numel / block, t.type_info->type_size, &bytes)) {
      return InvalidArgument(path_ + ": tensor '" + t.name + "': size overflows 64 bits");
    }
    t.nbytes = static_cast<uint64_t>(bytes);
    if (t.offset % alignment_ != 0) {
      return InvalidArgument(path_ + ": tensor '" + t.name + "': offset " +
                             std::to_string(t.offset) + " is not a multiple of the alignment " +
                             std::to_string(alignment_));
    }
    if (!tensor_index_.emplace(t.name, i).second) {
      return InvalidArgument(path_ + ": duplicate tensor '" + t.name + "'");
    }
  }
  // The data section starts at the next multiple of the alignment.
  const uint64_t pad = (alignment_ - c.pos() % alignment_) % alignment_;
  const uint64_t data_start = c.pos() + pad;
  if (n_tensors > 0 && data_start > size_) return p.Truncated("the padding before the tensor data");
  const uint64_t data_size = n_tensors > 0 ? size_ - data_start : 0;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return DataLoss(path_ + ": tensor '" + t.name + "' (" + t.TypeName() + " " + t.ShapeString() +
                      ", " + std::to_string(t.nbytes) + " bytes at offset " +
                      std::to_string(t.offset) + ") lies outside the file's " +
                      std::to_string(data_size) + " bytes of tensor data");
    }
    t.data = base_ + data_start + t.offset;
  }
  return Status::Ok();
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  const auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status WrongType(const std::string& path, const std::string& key, const GgufValue& v,
                 const char* want) {
  std::string got = GgufTypeName(v.type);
  if (v.type == GgufType::kArray) got += std::string(" of ") + GgufTypeName(v.elem_type);
  return InvalidArgument(path + ": key '" + key + "' must be " + want + ", got " + got);
}

bool IsSigned(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 ||
         t == GgufType::kInt64;
}

bool IntegerType(GgufType t) {
  GgufValue v;
  v.type = t;
  return v.is_integer();
}

// An integer element as int64 (false when an unsigned value exceeds INT64_MAX).
bool ToInt64(GgufType t, uint64_t bits, int64_t* out) {
  if (!IsSigned(t) && bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return false;
  }
  *out = static_cast<int64_t>(bits);
  return true;
}

}  // namespace

StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  if (v->type != GgufType::kString) return WrongType(path_, key, *v, "a string");
  return v->str;
}

StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  int64_t out = 0;
  if (!v->is_integer()) return WrongType(path_, key, *v, "an integer");
  if (!ToInt64(v->type, v->bits, &out)) {
    return InvalidArgument(path_ + ": key '" + key + "' is out of range");
  }
  return out;
}

StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  if (v->type == GgufType::kFloat32 || v->type == GgufType::kFloat64) return v->f;
  if (v->is_integer()) {
    return IsSigned(v->type) ? static_cast<double>(static_cast<int64_t>(v->bits))
                             : static_cast<double>(v->bits);
  }
  return WrongType(path_, key, *v, "a number");
}

StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  if (v->type != GgufType::kBool) return WrongType(path_, key, *v, "a bool");
  return v->bits != 0;
}

StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString) {
    return WrongType(path_, key, *v, "an array of strings");
  }
  return v->strings;
}

StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  if (v->type != GgufType::kArray || !IntegerType(v->elem_type)) {
    return WrongType(path_, key, *v, "an array of integers");
  }
  std::vector<int64_t> out(v->ints.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!ToInt64(v->elem_type, v->ints[i], &out[i])) {
      return InvalidArgument(path_ + ": key '" + key + "': element " + std::to_string(i) +
                             " is out of range");
    }
  }
  return out;
}

StatusOr<std::vector<double>> GgufFile::GetFloatArray(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFound(path_ + ": missing key '" + key + "'");
  if (v->type != GgufType::kArray ||
      (v->elem_type != GgufType::kFloat32 && v->elem_type != GgufType::kFloat64)) {
    return WrongType(path_, key, *v, "an array of floats");
  }
  return v->floats;
}

bool IsGgufPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  if (fs::path(path).extension() == ".gguf") return true;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint32_t magic = 0;
  const bool read = ::read(fd, &magic, 4) == 4;
  ::close(fd);
  return read && magic == kMagic;
}

}  // namespace llm
