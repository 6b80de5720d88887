#include "common/dtype.h"

#include <cstring>

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
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kQ4_1:
      return "Q4_1";
    case DType::kQ5_0:
      return "Q5_0";
    case DType::kQ5_1:
      return "Q5_1";
    case DType::kQ2_K:
      return "Q2_K";
    case DType::kQ3_K:
      return "Q3_K";
    case DType::kQ4_K:
      return "Q4_K";
    case DType::kQ5_K:
      return "Q5_K";
    case DType::kQ6_K:
      return "Q6_K";
    case DType::kIQ4_NL:
      return "IQ4_NL";
    case DType::kIQ4_XS:
      return "IQ4_XS";
    case DType::kMXFP4:
      return "MXFP4";
    case DType::kQ1_0:
      return "Q1_0";
    case DType::kNVFP4:
      return "NVFP4";
    case DType::kIQ2_XXS:
      return "IQ2_XXS";
    case DType::kIQ2_XS:
      return "IQ2_XS";
    case DType::kIQ2_S:
      return "IQ2_S";
    case DType::kIQ3_XXS:
      return "IQ3_XXS";
    case DType::kIQ3_S:
      return "IQ3_S";
    case DType::kIQ1_S:
      return "IQ1_S";
    case DType::kIQ1_M:
      return "IQ1_M";
    case DType::kTQ1_0:
      return "TQ1_0";
    case DType::kTQ2_0:
      return "TQ2_0";
    case DType::kQ4_0Packed:
      return "Q4_0 (packed)";
    case DType::kQ4_1Packed:
      return "Q4_1 (packed)";
    case DType::kQ5_0Packed:
      return "Q5_0 (packed)";
    case DType::kQ5_1Packed:
      return "Q5_1 (packed)";
    case DType::kQ8_0Packed:
      return "Q8_0 (packed)";
    case DType::kF16Packed:
      return "F16 (packed)";
    case DType::kBF16Packed:
      return "BF16 (packed)";
    case DType::kQ3_KPacked:
      return "Q3_K (packed)";
    case DType::kF16RowPanels:
      return "F16 (row panels)";
    case DType::kBF16RowPanels:
      return "BF16 (row panels)";
    case DType::kIQ4_NLPacked:
      return "IQ4_NL (packed)";
    case DType::kIQ4_XSPacked:
      return "IQ4_XS (packed)";
    case DType::kMXFP4Packed:
      return "MXFP4 (packed)";
    case DType::kQ1_0Packed:
      return "Q1_0 (packed)";
    case DType::kNVFP4Packed:
      return "NVFP4 (packed)";
    case DType::kQ1_0RowPanels:
      return "Q1_0 (row panels)";
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

bool ParseQuantFormat(std::string_view s, DType* out) {
  for (int i = static_cast<int>(DType::kQ8_0); i < kNumQuantizable; ++i) {
    const char* name = DTypeName(static_cast<DType>(i));
    if (s.size() != std::strlen(name)) continue;
    bool same = true;
    for (size_t c = 0; c < s.size(); ++c) {
      const char a = s[c] >= 'a' && s[c] <= 'z' ? static_cast<char>(s[c] - 'a' + 'A') : s[c];
      same = same && a == name[c];
    }
    if (same) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

}  // namespace llm
