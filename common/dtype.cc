#include "common/dtype.h"

namespace llm {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kQ8_0:
      return "Q8_0";
  }
  return "?";
}

bool ParseDType(std::string_view s, DType* out) {
  if (s == "F32" || s == "float32" || s == "float") {
    *out = DType::kF32;
  } else if (s == "F16" || s == "float16" || s == "half") {
    *out = DType::kF16;
  } else if (s == "BF16" || s == "bfloat16") {
    *out = DType::kBF16;
  } else {
    return false;
  }
  return true;
}

}  // namespace llm
