// Copies of a GGUF file's parts into a GgufWriter, for tests that write a variant of a real
// file (quantized, or with a tensor added).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/gguf.h"
#include "tests/common/gguf_writer.h"

namespace llm::testing {

// The bytes of a metadata value's body (after its type) as the file stores it.
inline std::string GgufValueBody(const GgufValue& v) {
  std::string out;
  auto scalar = [&](GgufType t, uint64_t bits, double f) {
    switch (t) {
      case GgufType::kFloat32:
        GgufWriter::Pod(&out, static_cast<float>(f));
        break;
      case GgufType::kFloat64:
        GgufWriter::Pod(&out, f);
        break;
      case GgufType::kUint8:
      case GgufType::kInt8:
      case GgufType::kBool:
        GgufWriter::Pod(&out, static_cast<uint8_t>(bits));
        break;
      case GgufType::kUint16:
      case GgufType::kInt16:
        GgufWriter::Pod(&out, static_cast<uint16_t>(bits));
        break;
      case GgufType::kUint32:
      case GgufType::kInt32:
        GgufWriter::Pod(&out, static_cast<uint32_t>(bits));
        break;
      default:
        GgufWriter::Pod(&out, bits);
        break;
    }
  };
  if (v.type == GgufType::kString) {
    GgufWriter::String(&out, v.str);
  } else if (v.type == GgufType::kArray) {
    GgufWriter::Pod(&out, static_cast<uint32_t>(v.elem_type));
    GgufWriter::Pod(&out, v.array_size());
    if (v.elem_type == GgufType::kString) {
      for (const auto& s : v.strings) GgufWriter::String(&out, s);
    } else if (v.elem_type == GgufType::kFloat32 || v.elem_type == GgufType::kFloat64) {
      for (double f : v.floats) scalar(v.elem_type, 0, f);
    } else {
      for (uint64_t b : v.ints) scalar(v.elem_type, b, 0);
    }
  } else {
    scalar(v.type, v.bits, v.f);
  }
  return out;
}

// Every metadata key of `src` (in key order), with its type and value.
inline void CopyGgufMetadata(const GgufFile& src, GgufWriter* w) {
  for (const auto& [key, v] : src.metadata()) {
    w->RawKv(key, static_cast<uint32_t>(v.type), GgufValueBody(v));
  }
}

// Every tensor of `src` as it is stored (name, dims, type, bytes).
inline void CopyGgufTensors(const GgufFile& src, GgufWriter* w) {
  for (const auto& info : src.tensors()) {
    w->Tensor(info.name, std::vector<uint64_t>(info.dims.begin(), info.dims.end()), info.type,
              std::string(static_cast<const char*>(info.data), info.nbytes));
  }
}

}  // namespace llm::testing
