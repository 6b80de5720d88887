// Element types of weights and activations, and scalar conversions between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace llm {

// The block formats are GGML's (GGUF files, or quantized at load): each row of a matrix is a
// sequence of blocks of BlockSize(t) consecutive weights stored in BlockBytes(t) bytes, laid out
// exactly as ggml's block_q8_0, block_q4_0, ..., block_q6_K (kernels/cpu/quant_blocks.h).
// kQ8_0: per 32 weights an fp16 scale d and 32 int8 q, weight = d * q.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  // IQ4_NL: per 32 weights an fp16 scale d and 32 4-bit indices into a fixed non-uniform table
  // of int8 values (kIQ4NLValues, kernels/cpu/quant_blocks.h), weight = d * value; the same 18
  // bytes as Q4_0 (low nibbles elements 0..15, high nibbles 16..31).
  kIQ4_NL,
  // IQ4_XS: IQ4_NL's values in super-blocks of 256 weights (136 bytes): an fp16 d, then 8 6-bit
  // sub-block scales ls (low 4 bits in scales_l's nibbles, high 2 in scales_h), then 128 bytes
  // of nibbles, 16 per 32-weight sub-block as IQ4_NL's; weight = d * (ls - 32) * value.
  kIQ4_XS,
  // MXFP4 (OCP microscaling FP4, gpt-oss and llama-quantize's MXFP4_MOE files): per 32 weights
  // an E8M0 exponent byte e and 32 4-bit E2M1 codes (Q4_0's nibble order), weight = 2^(e - 128)
  // * value, value from kMXFP4Values (quant_blocks.h: the E2M1 values doubled); 17 bytes.
  kMXFP4,
  // Q1_0 (1-bit sign weights, PrismML's Bonsai files; GGUF type 41): per 128 weights an fp16
  // scale d and 128 sign bits (bit j of byte j / 8 is element j, LSB first), weight = +d where the
  // bit is set, -d where not; 18 bytes. Its matmul runs per 32-weight sub-block on Q8_0
  // activations, as IQ4_XS's (BlockSize 128).
  kQ1_0,
  // NVFP4 (GGUF type 40, ggml's take on NVIDIA's FP4): per 64 weights 4 UE4M3 scale bytes (one per
  // 16 weights) and 32 bytes of E2M1 codes (sub-block s: byte 8s + j holds its elements j and j +
  // 8), weight = UE4M3Half(scale) * value, value from kMXFP4Values; 36 bytes. Its matmul runs per
  // 32-weight sub-block on Q8_0 activations with two scales a sub-block.
  kNVFP4,
  // The grid i-quants, super-blocks of 256 weights on Q8_K activations, file formats only (no
  // quantizer here): groups of 4 or 8 weights index fixed grids of magnitudes (or of -1/0/1 for
  // IQ1), with 8-bit sign patterns and 3- or 4-bit odd scales per 16 or 32 weights
  // (kernels/cpu/iquant_blocks.h has ggml's layouts).
  kIQ2_XXS,
  kIQ2_XS,
  kIQ2_S,
  kIQ3_XXS,
  kIQ3_S,
  kIQ1_S,
  kIQ1_M,
  // The ternary formats (TriLM / BitNet b1.58 files), super-blocks of 256 weights d * t with t
  // -1, 0 or 1 on Q8_K activations, file formats only: TQ1_0 packs 5 trits a byte (base 3,
  // scaled to 256 / 243), TQ2_0 one per 2 bits (t + 1); the fp16 d last.
  kTQ1_0,
  kTQ2_0,
  // Not file formats: Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 rows repacked once at load by the CPU
  // backend for its SIMD kernels (kernels/cpu/legacy_packed.h), the same bytes per row as the
  // format. Only that backend's Matmul reads them; no file, config or other op ever sees them.
  kQ4_0Packed,
  kQ4_1Packed,
  kQ5_0Packed,
  kQ5_1Packed,
  kQ8_0Packed,
  // Not file formats either: F16 / BF16 rows interleaved in groups of 4 by the CPU backend for
  // its SIMD kernels (kernels/cpu/f16_packed.h), 2 bytes per weight as F16 / BF16.
  kF16Packed,
  kBF16Packed,
  // Not a file format either: Q3_K blocks with their high-bit mask in bit planes, by the CPU
  // backend for its AVX-512 kernels (kernels/cpu/kquant_packed.h), the same 110 bytes per block.
  kQ3_KPacked,
  // Not file formats either: F16 / BF16 rows in panels of 16, each weight column of a panel one
  // 32-byte vector, by the CPU backend for its AVX-512 kernels (kernels/cpu/f16_row_panels.h),
  // 2 bytes per weight as F16 / BF16.
  kF16RowPanels,
  kBF16RowPanels,
  // Not file formats either: IQ4_NL rows repacked as Q4_0's are, IQ4_XS rows likewise per
  // 32-weight sub-block with their scales gathered per group (kernels/cpu/legacy_packed.h).
  kIQ4_NLPacked,
  kIQ4_XSPacked,
  // And MXFP4 rows likewise, their exponent bytes gathered per group (legacy_packed.h).
  kMXFP4Packed,
  // And Q1_0 rows per 32-weight sub-block, their sign bits as 8 byte masks of a group
  // (legacy_packed.h).
  kQ1_0Packed,
  // And NVFP4 rows per 32-weight sub-block in Q4_0's runs, their scale bytes gathered per group
  // (legacy_packed.h).
  kNVFP4Packed,
  // And Q1_0 rows in panels of 16, per 32-weight sub-block a 64-byte vector of the 16 rows' sign
  // nibbles (4 weights each) that a 64-entry byte table turns into partial sums, by the CPU
  // backend for its AVX-512 VBMI GEMV (kernels/cpu/q1_0_row_panels.h), 18 bytes per 128 weights.
  kQ1_0RowPanels,
};
constexpr int kNumDTypes = 27;         // the formats a file can hold (kF32 .. kTQ2_0)
constexpr int kNumQuantizable = 18;    // those a config can name, with a quantizer (kF32 .. kNVFP4)
constexpr int kNumMatmulFormats = 43;  // and the backend layouts (kQ4_0Packed .. kQ1_0RowPanels)

constexpr int kQ8BlockSize = 32;      // weights per Q8_0 block
constexpr size_t kQ8BlockBytes = 34;  // fp16 scale + 32 int8
constexpr int kQKLegacy = 32;         // weights per Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 block
constexpr int kQK_K = 256;            // weights per K-quant super-block (Q2_K ... Q6_K)

// Bytes per element of an element format (F32, F16, BF16); for a block format use RowBytes.
inline size_t DTypeSize(DType t) {
  return t == DType::kF32 ? 4 : 2;
}
constexpr bool IsBlockFormat(DType t) {
  return (t >= DType::kQ8_0 && t <= DType::kQ8_0Packed) || t == DType::kQ3_KPacked ||
         t == DType::kIQ4_NLPacked || t == DType::kIQ4_XSPacked || t == DType::kMXFP4Packed ||
         t == DType::kQ1_0Packed || t == DType::kNVFP4Packed || t == DType::kQ1_0RowPanels;
}
// The K-quants: super-blocks of 256 whose matmul runs on Q8_K activations.
constexpr bool IsKQuant(DType t) {
  return (t >= DType::kQ2_K && t <= DType::kQ6_K) || t == DType::kQ3_KPacked;
}
// The grid i-quants (IQ2_XXS ... IQ1_M): super-blocks of 256 on Q8_K activations, as the K-quants.
constexpr bool IsGridQuant(DType t) {
  return t >= DType::kIQ2_XXS && t <= DType::kIQ1_M;
}
// TQ1_0 and TQ2_0.
constexpr bool IsTernaryQuant(DType t) {
  return t == DType::kTQ1_0 || t == DType::kTQ2_0;
}
// The formats whose super-blocks decode into kernels/cpu/iquant_blocks.h's DecodedIQ (weight =
// f * s * v, exact small integers): the grid i-quants and the ternary formats.
constexpr bool DecodesAsIQ(DType t) {
  return IsGridQuant(t) || IsTernaryQuant(t);
}
// Weights per block (1 for element formats). IQ4_XS's super-blocks of 256, Q1_0's blocks of 128
// and NVFP4's of 64 are not K-quants: their matmul runs per 32-weight sub-block on Q8_0
// activations, as the 32-block formats'.
constexpr int BlockSize(DType t) {
  if (!IsBlockFormat(t)) return 1;
  if (IsKQuant(t) || DecodesAsIQ(t) || t == DType::kIQ4_XS || t == DType::kIQ4_XSPacked) {
    return kQK_K;
  }
  if (t == DType::kQ1_0 || t == DType::kQ1_0Packed || t == DType::kQ1_0RowPanels) return 128;
  if (t == DType::kNVFP4 || t == DType::kNVFP4Packed) return 64;
  return kQKLegacy;
}
// Bytes per block (per element for element formats): ggml's type_size.
constexpr size_t BlockBytes(DType t) {
  constexpr size_t kBytes[kNumMatmulFormats] = {
      4,   2,  2,  34, 18, 20, 22, 24, 84, 110, 144, 176, 210, 18, 136, 17, 18,  36, 66, 74, 82, 98,
      110, 50, 56, 54, 66, 18, 20, 22, 24, 34,  2,   2,   110, 2,  2,   18, 136, 17, 18, 36, 18};
  return kBytes[static_cast<int>(t)];
}
// Bytes of a row of `cols` elements (for a block format `cols` is a multiple of BlockSize).
constexpr size_t RowBytes(DType t, int64_t cols) {
  return static_cast<size_t>(cols / BlockSize(t)) * BlockBytes(t);
}
const char* DTypeName(DType t);
// Parses "F32"/"F16"/"BF16" (safetensors spelling) and "float32"/"float16"/"bfloat16" (config
// spelling). Returns false for anything else.
bool ParseDType(std::string_view s, DType* out);
// Parses a model.quantization value: "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k",
// "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "mxfp4", "q1_0", "nvfp4" (any case): the formats
// below kNumQuantizable. Returns false for anything else (the grid i-quants and the ternary formats
// too: no quantizer).
bool ParseQuantFormat(std::string_view s, DType* out);

inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, NaN stays NaN.
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; overflow goes to infinity.
inline uint16_t F32ToF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t drop = 126 - e;  // value / 2^-24 = mant * 2^(e - 126)
    uint32_t res = mant >> drop;
    uint32_t rem = mant & ((1u << drop) - 1);
    uint32_t halfway = 1u << (drop - 1);
    if (rem > halfway || (rem == halfway && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
  }
  uint32_t res = ((abs >> 13) - ((127 - 15) << 10));
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  return static_cast<uint16_t>(sign | res);
}

}  // namespace llm
