// A GGUF writer for tests: builds valid files (tokenizers, tiny models) and, through its raw
// setters, broken ones for the reader's error paths. Little-endian, version 3 by default.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace llm::testing {

class GgufWriter {
 public:
  // Metadata values, appended in call order.
  void U32(const std::string& key, uint32_t v) { Scalar(key, 4, &v, 4); }
  void I32(const std::string& key, int32_t v) { Scalar(key, 5, &v, 4); }
  void F32(const std::string& key, float v) { Scalar(key, 6, &v, 4); }
  void Bool(const std::string& key, bool v) {
    const uint8_t b = v ? 1 : 0;
    Scalar(key, 7, &b, 1);
  }
  void U64(const std::string& key, uint64_t v) { Scalar(key, 10, &v, 8); }
  void F64(const std::string& key, double v) { Scalar(key, 12, &v, 8); }
  void Str(const std::string& key, const std::string& v) {
    Key(key, 8);
    String(&kv_, v);
    ++n_kv_;
  }
  void StrArray(const std::string& key, const std::vector<std::string>& v) {
    ArrayHeader(key, 8, v.size());
    for (const auto& s : v) String(&kv_, s);
  }
  void I32Array(const std::string& key, const std::vector<int32_t>& v) {
    ArrayHeader(key, 5, v.size());
    for (int32_t x : v) Pod(&kv_, x);
  }
  void F32Array(const std::string& key, const std::vector<float>& v) {
    ArrayHeader(key, 6, v.size());
    for (float x : v) Pod(&kv_, x);
  }
  // Any bytes as the body of a key of `type` (for broken values).
  void RawKv(const std::string& key, uint32_t type, const std::string& body) {
    Key(key, type);
    kv_ += body;
    ++n_kv_;
  }

  // A tensor with `dims` in GGML order (dims[0] = row length) of GGML `type`; `data` goes to the
  // data section at the next aligned offset (or at `offset` when >= 0, without data).
  void Tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
              const std::string& data, int64_t offset = -1) {
    String(&info_, name);
    Pod(&info_, static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) Pod(&info_, d);
    Pod(&info_, type);
    if (offset >= 0) {
      Pod(&info_, static_cast<uint64_t>(offset));
    } else {
      while (data_.size() % alignment_ != 0) data_.push_back('\0');
      Pod(&info_, static_cast<uint64_t>(data_.size()));
      data_ += data;
    }
    ++n_tensors_;
  }
  void TensorF32(const std::string& name, const std::vector<uint64_t>& dims,
                 const std::vector<float>& v) {
    std::string bytes(v.size() * 4, '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    Tensor(name, dims, 0, bytes);
  }

  void set_alignment(uint64_t a) { alignment_ = a; }
  void set_version(uint32_t v) { version_ = v; }

  std::string Build() const {
    std::string out = "GGUF";
    Pod(&out, version_);
    Pod(&out, n_tensors_);
    Pod(&out, n_kv_);
    out += kv_;
    out += info_;
    if (n_tensors_ > 0) {
      while (out.size() % alignment_ != 0) out.push_back('\0');
      out += data_;
    }
    return out;
  }
  void Write(const std::string& path) const { std::ofstream(path, std::ios::binary) << Build(); }

  template <typename T>
  static void Pod(std::string* out, T v) {
    out->append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  static void String(std::string* out, const std::string& s) {
    Pod(out, static_cast<uint64_t>(s.size()));
    *out += s;
  }

 private:
  void Key(const std::string& key, uint32_t type) {
    String(&kv_, key);
    Pod(&kv_, type);
  }
  void Scalar(const std::string& key, uint32_t type, const void* v, size_t n) {
    Key(key, type);
    kv_.append(static_cast<const char*>(v), n);
    ++n_kv_;
  }
  void ArrayHeader(const std::string& key, uint32_t elem, uint64_t n) {
    Key(key, 9);
    Pod(&kv_, elem);
    Pod(&kv_, n);
    ++n_kv_;
  }

  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::string kv_, info_, data_;
};

}  // namespace llm::testing
