// The table GEMV of Q1_0 row panels (q1_0_row_panels.h), the tables it reads and the panel GEMM,
// for the AVX-512 VNNI set on CPUs with VBMI (vpermb) and BITALG (vpshufbitqmb). Compiled with
// those flags alone; matmul_avx512_vnni.cc hands these out only where the CPU has them.
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593, see matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/legacy_packed.h"  // PackedXGroup
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q1_0_row_panels.h"
#include "kernels/cpu/q8_0.h"

namespace llm::kernels::internal {
namespace {

// The table builder's byte indices into a sub-block's parts (bytes 0..31: x & 15, 32..63: x >> 4):
// byte 16j + n of index[2h + p][t] selects part p of activation 4(4h + j) + t, the term of
// weight t of quad 4h + j in entry n of table 2h + p.
struct alignas(64) PartIndex {
  uint8_t index[4][4][64];
};
constexpr PartIndex MakePartIndex() {
  PartIndex q{};
  for (int table = 0; table < 4; ++table) {
    const int h = table / 2, p = table % 2;
    for (int t = 0; t < 4; ++t) {
      for (int e = 0; e < 64; ++e) {
        q.index[table][t][e] = static_cast<uint8_t>(32 * p + 4 * (4 * h + e / 16) + t);
      }
    }
  }
  return q;
}
constexpr PartIndex kPartIndex = MakePartIndex();
// Bit 16j + n of kSignBit[t]: bit t of n (the entries where weight t is +1).
constexpr uint64_t kSignBit[4] = {0xAAAAAAAAAAAAAAAAull, 0xCCCCCCCCCCCCCCCCull,
                                  0xF0F0F0F0F0F0F0F0ull, 0xFF00FF00FF00FF00ull};

// Sub-block s's integer sums of the 16 rows whose indices are `v` (q1_0_row_panels.h): per
// dword lane i, the sum over the 32 weights of row i of (+-1) x.
[[gnu::always_inline]] inline __m512i SubBlockSums(__m512i v, const Q1_0SubTables& t) {
  // index bytes 16j + nibble: quad j of a run is byte j of its row's dword
  const __m512i quad = _mm512_set1_epi32(0x30201000);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i lo = _mm512_ternarylogic_epi32(v, nibble, quad, 0xEA);  // (v & nibble) | quad
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), nibble, quad, 0xEA);
  // Quads j and j + 4 of a row meet in the same byte: their low parts' sums added (|sum| <= 120)
  // and their high parts' (<= 64) still fit a byte, so one vpdpbusd widens each.
  const __m512i lo_parts = _mm512_add_epi8(_mm512_permutexvar_epi8(lo, _mm512_load_si512(t.t[0])),
                                           _mm512_permutexvar_epi8(hi, _mm512_load_si512(t.t[2])));
  const __m512i hi_parts = _mm512_add_epi8(_mm512_permutexvar_epi8(lo, _mm512_load_si512(t.t[1])),
                                           _mm512_permutexvar_epi8(hi, _mm512_load_si512(t.t[3])));
  const __m512i ones = _mm512_set1_epi8(1), sixteens = _mm512_set1_epi8(16);
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, lo_parts), sixteens,
                             hi_parts);
}

// The panels' stream is prefetched 1 KiB ahead into L1 and 4 KiB ahead into L2: on Zen 4 (5 Dec
// 2026, kernel_bench gemv from DRAM, 1 thread, two rounds) 12.6-13.6 GB/s with the packed
// 32-block formats' distance (4 KiB, none into L2) or 1 KiB alone, 15.5-16.3 with a second
// prefetch into L2 4 or 8 KiB ahead (1 or 2 KiB into L1 alike), 7.1-13.0 with none.
constexpr uintptr_t kPrefetchL1 = 1024, kPrefetchL2 = 4096;
// One activation row's tables against a panel of r rows (kFull: r = 16) of nb / 4 blocks: the
// 16 lanes' outputs (rows past r: 0), each the tree of quant_blocks.h over its 16 chains.
template <bool kFull>
__m512 PanelRow(const uint8_t* tables, int nb, const uint8_t* w, int r, bool prefetch) {
  const auto* t = reinterpret_cast<const Q1_0SubTables*>(tables);
  const auto* dx = reinterpret_cast<const float*>(tables + nb * sizeof(Q1_0SubTables));
  const __mmask64 rows64 = kFull ? ~__mmask64{0} : (__mmask64{1} << (4 * r)) - 1;
  const __mmask16 rows16 = static_cast<__mmask16>((1u << r) - 1);
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const int64_t block_bytes = 18 * static_cast<int64_t>(r);
  // The chains live in memory (a load and a store a step). Tried, not kept (kernel_bench gemv, 1
  // thread, Zen 4): 16 sub-blocks unrolled so that each chain is a register (GCC spilled others,
  // no faster); four passes over the blocks, pass q into chains 4q .. 4q + 3 as
  // registers: 21.1-22.4 against 19.6-21.0 GB/s in cache but 10.2-11.8 against 15.5-16.7 from DRAM
  // (blocks 4 apart).
  for (int b = 0; b < nb / 4; ++b) {
    const uint8_t* p = w + b * block_bytes;
    if (prefetch) PrefetchAhead(p, block_bytes, kPrefetchL1, kPrefetchL2);
    const __m256i d16 = kFull ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 256))
                              : _mm256_maskz_loadu_epi16(rows16, p + 16 * r);
    const __m512 dw = _mm512_cvtph_ps(d16);
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const int s = 4 * b + u;
      const __m512i v =
          kFull ? _mm512_loadu_si512(p + 64 * u) : _mm512_maskz_loadu_epi8(rows64, p + 4 * r * u);
      const __m512i sums = SubBlockSums(v, t[s]);
      // as the scalar reference: fma(d * dx, float(sum), chain s % 16)
      acc[s % 16] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx[s])),
                                    _mm512_cvtepi32_ps(sums), acc[s % 16]);
    }
  }
  __m512 h8[8], h4[4];
  for (int l = 0; l < 8; ++l) h8[l] = _mm512_add_ps(acc[l], acc[l + 8]);
  for (int l = 0; l < 4; ++l) h4[l] = _mm512_add_ps(h8[l], h8[l + 4]);
  return _mm512_add_ps(_mm512_add_ps(h4[0], h4[2]), _mm512_add_ps(h4[1], h4[3]));
}

// Several input rows: the weights' signs as bytes (0 or 2) that each row's activations meet
// through vpdpbusd, as kQ1_0Packed's kernels do, so a panel's weights are expanded once for MR
// rows. Quad j of the 16 rows: byte 4i + t of the expansion is bit t of nibble j / 4 of byte
// 4i + j % 4 of the run, which vpshufbitqmb picks out of row i's qword (bit 32 (i % 2) + 8 (j % 4)
// + 4 (j / 4) + t) into a byte mask.
struct alignas(64) QuadBitIndex {
  uint8_t idx[8][64];
};
constexpr QuadBitIndex MakeQuadBitIndex() {
  QuadBitIndex q{};
  for (int j = 0; j < 8; ++j) {
    for (int p = 0; p < 64; ++p) {
      const int i = p / 4, t = p % 4;
      q.idx[j][p] = static_cast<uint8_t>(32 * (i % 2) + 8 * (j % 4) + 4 * (j / 4) + t);
    }
  }
  return q;
}
constexpr QuadBitIndex kQuadBitIndex = MakeQuadBitIndex();

// MR input rows (PackedX groups, rows ldx groups apart) against a panel of r rows: out[i] the
// 16 lanes' outputs of row i (rows past r: 0), each the tree over its 16 chains.
template <int MR, bool kFull>
void PanelRows(const PackedXGroup* x, int64_t ldx, int nb, const uint8_t* w, int r,
               __m512 (&out)[MR]) {
  const __mmask64 rows64 = kFull ? ~__mmask64{0} : (__mmask64{1} << (4 * r)) - 1;
  const __mmask16 rows16 = static_cast<__mmask16>((1u << r) - 1);
  const __m512i twos = _mm512_set1_epi8(2);
  __m512 acc[MR][16];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  const int64_t block_bytes = 18 * static_cast<int64_t>(r);
  for (int b = 0; b < nb / 4; ++b) {
    const uint8_t* p = w + b * block_bytes;
    const __m256i d16 = kFull ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 256))
                              : _mm256_maskz_loadu_epi16(rows16, p + 16 * r);
    const __m512 dw = _mm512_cvtph_ps(d16);
    for (int u = 0; u < 4; ++u) {
      const int s = 4 * b + u, g = s / 16, l = s % 16;
      const __m512i v =
          kFull ? _mm512_loadu_si512(p + 64 * u) : _mm512_maskz_loadu_epi8(rows64, p + 4 * r * u);
      __m512i sums[MR];
      for (int i = 0; i < MR; ++i) {  // sum of (u - 1) x = -S + sum of u x
        sums[i] = _mm512_set1_epi32(x[i * ldx + g].start[l] >> 3);
      }
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __mmask64 bits =
            _mm512_bitshuffle_epi64_mask(v, _mm512_load_si512(kQuadBitIndex.idx[j]));
        const __m512i signs = _mm512_maskz_mov_epi8(bits, twos);
        for (int i = 0; i < MR; ++i) {
          int32_t quad;
          std::memcpy(&quad, x[i * ldx + g].q[j] + 4 * l, 4);
          sums[i] = _mm512_dpbusd_epi32(sums[i], signs, _mm512_set1_epi32(quad));
        }
      }
      for (int i = 0; i < MR; ++i) {
        acc[i][l] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x[i * ldx + g].d[l])),
                                    _mm512_cvtepi32_ps(sums[i]), acc[i][l]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    __m512 h8[8], h4[4];
    for (int c = 0; c < 8; ++c) h8[c] = _mm512_add_ps(acc[i][c], acc[i][c + 8]);
    for (int c = 0; c < 4; ++c) h4[c] = _mm512_add_ps(h8[c], h8[c + 4]);
    out[i] = _mm512_add_ps(_mm512_add_ps(h4[0], h4[2]), _mm512_add_ps(h4[1], h4[3]));
  }
}

template <int MR>
void StoreRows(const __m512 (&out)[MR], int i0, int p0, int r, const float* bias, float* y,
               int ldy) {
  const __mmask16 rows = static_cast<__mmask16>((1u << r) - 1);
  const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(rows, bias + p0) : __m512{};
  for (int i = 0; i < MR; ++i) {
    const __m512 o = bias != nullptr ? _mm512_add_ps(out[i], b) : out[i];
    _mm512_mask_storeu_ps(y + static_cast<int64_t>(i0 + i) * ldy + p0, rows, o);
  }
}

template <int MR>
void RowTile(const PackedXGroup* x, int64_t ldx, int nb, const uint8_t* panel, int r, int i0,
             int p0, const float* bias, float* y, int ldy) {
  __m512 out[MR];
  if (r == kQ1_0PanelRows) {
    PanelRows<MR, true>(x, ldx, nb, panel, r, out);
  } else {
    PanelRows<MR, false>(x, ldx, nb, panel, r, out);
  }
  StoreRows<MR>(out, i0, p0, r, bias, y, ldy);
}

}  // namespace

void MakeQ1_0TablesAvx512(const BlockQ8_0* x, int nb, uint8_t* out) {
  auto* tables = reinterpret_cast<Q1_0SubTables*>(out);
  auto* dx = reinterpret_cast<float*>(out + nb * sizeof(Q1_0SubTables));
  const __m256i nibble = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  for (int s = 0; s < nb; ++s) {
    dx[s] = _cvtsh_ss(x[s].d);  // exact, as F16ToF32
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[s].qs));
    const __m256i lo = _mm256_and_si256(q, nibble);
    // x >> 4 (arithmetic) per byte: the high nibble, sign-extended from its bit 3
    const __m256i hi = _mm256_sub_epi8(
        _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), nibble), eight), eight);
    const __m512i parts = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    for (int table = 0; table < 4; ++table) {
      // entry = sum over t of (bit t of n ? +part : -part), exact in a byte (|sum| <= 60)
      __m512i e = _mm512_setzero_si512();
      for (int t = 0; t < 4; ++t) {
        const __m512i term =
            _mm512_permutexvar_epi8(_mm512_load_si512(kPartIndex.index[table][t]), parts);
        e = _mm512_mask_add_epi8(_mm512_sub_epi8(e, term), _cvtu64_mask64(kSignBit[t]), e, term);
      }
      _mm512_store_si512(tables[s].t[table], e);
    }
  }
}

void Q1_0TablePanelAvx512(const void* xt, int m, int k, const void* w, int n0, int n1,
                          const float* bias, float* y, int ldy) {
  const int nb = k / 32;
  const int64_t row_bytes = static_cast<int64_t>(k / 128) * 18;
  const int64_t table_bytes = Q1_0LutRowBytes(nb);
  for (int p0 = n0; p0 < n1; p0 += kQ1_0PanelRows) {
    const int r = n1 - p0 < kQ1_0PanelRows ? n1 - p0 : kQ1_0PanelRows;
    const auto* panel = static_cast<const uint8_t*>(w) + p0 * row_bytes;
    const __mmask16 rows = static_cast<__mmask16>((1u << r) - 1);
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(rows, bias + p0) : __m512{};
    for (int i = 0; i < m; ++i) {
      const auto* tables = static_cast<const uint8_t*>(xt) + i * table_bytes;
      __m512 out = r == kQ1_0PanelRows ? PanelRow<true>(tables, nb, panel, r, i == 0)
                                       : PanelRow<false>(tables, nb, panel, r, i == 0);
      if (bias != nullptr) out = _mm512_add_ps(out, b);
      _mm512_mask_storeu_ps(y + static_cast<int64_t>(i) * ldy + p0, rows, out);
    }
  }
}

}  // namespace llm::kernels::internal

namespace llm::kernels::internal {

void Q1_0PanelGemmAvx512(const void* xq, int m, int k, const void* w, int n0, int n1,
                         const float* bias, float* y, int ldy) {
  const int nb = k / 32;
  const int64_t ldx = PackedXGroups(nb);
  const auto* x = static_cast<const PackedXGroup*>(xq);
  const int64_t row_bytes = static_cast<int64_t>(k / 128) * 18;
  for (int p0 = n0; p0 < n1; p0 += kQ1_0PanelRows) {
    const int r = n1 - p0 < kQ1_0PanelRows ? n1 - p0 : kQ1_0PanelRows;
    const auto* panel = static_cast<const uint8_t*>(w) + p0 * row_bytes;
    int i = 0;
    for (; i + 4 <= m; i += 4) RowTile<4>(x + i * ldx, ldx, nb, panel, r, i, p0, bias, y, ldy);
    switch (m - i) {
      case 3:
        RowTile<3>(x + i * ldx, ldx, nb, panel, r, i, p0, bias, y, ldy);
        break;
      case 2:
        RowTile<2>(x + i * ldx, ldx, nb, panel, r, i, p0, bias, y, ldy);
        break;
      case 1:
        RowTile<1>(x + i * ldx, ldx, nb, panel, r, i, p0, bias, y, ldy);
        break;
      default:
        break;
    }
  }
}

}  // namespace llm::kernels::internal
