// F16 and BF16 weights on AMX-BF16 tiles (the "avx512-amx" set, where the CPU has AMX-BF16,
// opt-in: LLM_AMX_F16=1): every m, so that an output row has the same bits in a decode step, a
// batch or a prefill chunk.
//
// Why: with 16 input rows or more the AVX-512 F16 tiles are bound by their FMAs (one 16-lane
// FMA per weight chunk per row), so batch 16 was 6.7-7x batch 1; a tile product does 16 x 16 x
// 16 of them per instruction. BF16 holds 8 significant bits, F16 11 and the activations 24, so
// both sides are split, exactly where it matters:
// - an F16 weight w is hi + lo, hi = w's float with the low 16 bits cleared (bf16, exact) and
//   lo = w - hi (at most 3 significant bits: exact in bf16). A's dword for weight k of a row is
//   the pair (lo, hi): the tile's pair sum lo * x + hi * x is w * x. A BF16 weight is exact as
//   it is: A's dword is weights (2p, 2p + 1) of the row, as the format stores them.
// - an activation x (F32) is xh + xl: xh its bits cleared the same way, xl = x - xh rounded to
//   bf16 (nearest even): x to ~16 significant bits, so the result is within ~2^-17 of the F32
//   product sum per term (llama.cpp rounds x to F16: 11 bits). B holds xh and xl in two tiles:
//   for F16 each dword holds the value twice, meeting both halves of A's pair
//   (MakeBf16TokenTiles); for BF16 the values of weights 2p and 2p + 1
//   (MakeBf16PairTokenTiles).
// Products of bf16 values are exact in F32; the tiles sum them in F32, and a row's sum runs
// over k in chunks (16 k for F16, 32 for BF16) in increasing order, xh then xl per chunk,
// whatever m and the token's place in its tile (tested bitwise against m = 1). k must be a
// multiple of the chunk, else the set's AVX-512 panels run, for every m alike.
//
// Per panel (16 weight rows) and chunk the rows are made into one A tile (in L1) and every token
// tile (16 input rows) multiplies it, 2 at a time (C in tiles 4 and 5). From the packed
// layout (f16_packed.h) the 8-weight chunks of a group of 4 rows that a chunk needs are
// contiguous (128 bytes for F16, 256 for BF16): one stream per group.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cpuid.h>
#include <immintrin.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/f16_packed.h"
#include "kernels/cpu/matmul_internal.h"

namespace llm::kernels::internal {
namespace {

#include "kernels/cpu/amx_tiles.h"  // NOLINT: included into this TU's anonymous namespace

// A weight's 16 bits as a type of this TU: std::vector<uint16_t>'s members compiled here (with
// AVX-512) could be the copies the linker keeps for every TU; this vector's are this TU's own.
struct F16Bits {
  uint16_t bits;
};
static_assert(sizeof(F16Bits) == 2);
// One chunk's A tile (16 weight rows), kept for the panel's later passes; a type of this TU too.
struct alignas(64) AChunk {
  uint32_t a[16][16];
};

// All eight tiles 16 rows x 64 bytes: 0, 1 A (alternating chunks), 2, 3 B (xh, xl), 4..7 C.
void ConfigureF16Tiles() {
  TileConfig c{};
  c.palette = 1;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  __asm__ volatile("ldtilecfg %0" : : "m"(c));  // see ConfigureTiles in matmul_amx.cc
}

// 16 weights as floats -> 16 (lo, hi) bf16 pairs, lo in the low word.
inline __m512i SplitPairs(__m512 f) {
  const __m512i hi = _mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(-65536));
  const __m512 lo = _mm512_sub_ps(f, _mm512_castsi512_ps(hi));
  return _mm512_or_si512(hi, _mm512_srli_epi32(_mm512_castps_si512(lo), 16));
}

// The weight formats: A for chunk kc (kChunk weights of 16 rows) from plain rows (row r at
// w + r * k; rows past `rows` are zero) or from 4 whole groups of packed rows (f16_packed.h:
// group g starts at w + 4 g k, its 8-weight chunks of 4 rows one after the other).
struct F16Rows {
  static constexpr int kChunk = 16;  // a dword per weight: (lo, hi)
  static void Plain(const uint16_t* w, int64_t k, int rows, int kc, uint32_t (*a)[16]) {
    for (int r = 0; r < rows; ++r) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * k + 16 * kc));
      _mm512_store_si512(a[r], SplitPairs(_mm512_cvtph_ps(h)));
    }
    for (int r = rows; r < 16; ++r) _mm512_store_si512(a[r], _mm512_setzero_si512());
  }
  // Chunks 2 kc and 2 kc + 1 of a group: 4 rows x 8 weights each.
  static void Packed(const uint16_t* w, int64_t k, int kc, uint32_t (*a)[16]) {
    for (int g = 0; g < 4; ++g) {
      const uint16_t* c = w + 4 * g * k + 64 * kc;
      const __m512i v0 = _mm512_loadu_si512(c), v1 = _mm512_loadu_si512(c + 32);
      const __m512i f01 = SplitPairs(_mm512_cvtph_ps(_mm512_castsi512_si256(v0)));
      const __m512i f23 = SplitPairs(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(v0, 1)));
      const __m512i g01 = SplitPairs(_mm512_cvtph_ps(_mm512_castsi512_si256(v1)));
      const __m512i g23 = SplitPairs(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(v1, 1)));
      _mm512_store_si512(a[4 * g + 0], _mm512_shuffle_i64x2(f01, g01, 0x44));
      _mm512_store_si512(a[4 * g + 1], _mm512_shuffle_i64x2(f01, g01, 0xEE));
      _mm512_store_si512(a[4 * g + 2], _mm512_shuffle_i64x2(f23, g23, 0x44));
      _mm512_store_si512(a[4 * g + 3], _mm512_shuffle_i64x2(f23, g23, 0xEE));
    }
  }
};
struct Bf16Rows {
  static constexpr int kChunk = 32;  // a dword per two weights: (k, k + 1), as they are
  static void Plain(const uint16_t* w, int64_t k, int rows, int kc, uint32_t (*a)[16]) {
    for (int r = 0; r < rows; ++r) {
      _mm512_store_si512(a[r], _mm512_loadu_si512(w + r * k + 32 * kc));
    }
    for (int r = rows; r < 16; ++r) _mm512_store_si512(a[r], _mm512_setzero_si512());
  }
  // Chunks 4 kc .. 4 kc + 3 of a group: 128-bit lane i of chunk j is row i's 8 weights of chunk
  // j; a 4 x 4 transpose of lanes makes each row's 32.
  static void Packed(const uint16_t* w, int64_t k, int kc, uint32_t (*a)[16]) {
    for (int g = 0; g < 4; ++g) {
      const uint16_t* c = w + 4 * g * k + 128 * kc;
      const __m512i c0 = _mm512_loadu_si512(c), c1 = _mm512_loadu_si512(c + 32);
      const __m512i c2 = _mm512_loadu_si512(c + 64), c3 = _mm512_loadu_si512(c + 96);
      const __m512i t0 = _mm512_shuffle_i64x2(c0, c1, 0x44),
                    t1 = _mm512_shuffle_i64x2(c0, c1, 0xEE);
      const __m512i t2 = _mm512_shuffle_i64x2(c2, c3, 0x44),
                    t3 = _mm512_shuffle_i64x2(c2, c3, 0xEE);
      _mm512_store_si512(a[4 * g + 0], _mm512_shuffle_i64x2(t0, t2, 0x88));
      _mm512_store_si512(a[4 * g + 1], _mm512_shuffle_i64x2(t0, t2, 0xDD));
      _mm512_store_si512(a[4 * g + 2], _mm512_shuffle_i64x2(t1, t3, 0x88));
      _mm512_store_si512(a[4 * g + 3], _mm512_shuffle_i64x2(t1, t3, 0xDD));
    }
  }
};

// The tile operations of the panel on the hardware: tiles 0, 1 A; 2, 3 B (xh, xl); 4..7 C.
// GCC's tile intrinsics stringify their tile numbers, so each tile is spelled out.
#define LLM_F16_DP(C, A)   \
  _tile_dpbf16ps(C, A, 2); \
  _tile_dpbf16ps(C, A, 3)
#define LLM_F16_PRODUCT_INTO_C(A) \
  switch (j) {                    \
    case 0:                       \
      LLM_F16_DP(4, A);           \
      break;                      \
    case 1:                       \
      LLM_F16_DP(5, A);           \
      break;                      \
    case 2:                       \
      LLM_F16_DP(6, A);           \
      break;                      \
    default:                      \
      LLM_F16_DP(7, A);           \
      break;                      \
  }
struct HardwareTiles {
  static void Configure() { ConfigureF16Tiles(); }
  static void Release() { _tile_release(); }
  static void ZeroC() {
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
  }
  template <int kA>
  static void LoadA(const void* a) {
    if constexpr (kA == 0) {
      _tile_loadd(0, a, 64);
    } else {
      _tile_loadd(1, a, 64);
    }
  }
  // C tile 4 + j += A tile kA times token tile b: xh, then xl.
  template <int kA>
  static void Product(int j, const Bf16TokenTile& b) {
    _tile_loadd(2, b.hi, 64);
    _tile_loadd(3, b.lo, 64);
    if constexpr (kA == 0) {
      LLM_F16_PRODUCT_INTO_C(0);
    } else {
      LLM_F16_PRODUCT_INTO_C(1);
    }
  }
  static void StoreC(int j, float (*out)[16]) {
    switch (j) {
      case 0:
        _tile_stored(4, out, 64);
        break;
      case 1:
        _tile_stored(5, out, 64);
        break;
      case 2:
        _tile_stored(6, out, 64);
        break;
      default:
        _tile_stored(7, out, 64);
        break;
    }
  }
};
#undef LLM_F16_PRODUCT_INTO_C
#undef LLM_F16_DP

// The same operations in software (SoftFloatTilesPanel), with the hardware's rounding: for each
// output, tdpbf16ps sums the products of the pairs' low words (e) and of their high words (o) in
// two F32 chains from +0 over the instruction's pairs in order, then adds e + o to C: c + (e + o),
// three roundings per pair of chains, denormal inputs read as zero and denormal results flushed.
// Measured on the AMX host of 3 Dec 2026: 300000 random single-instruction cases (exponents to
// +-70, zeros and signed zeros) alike bitwise; the sequential reading of Intel's pseudo-code
// (each pair's two products added to C in turn) differs in most outputs. With it these panels
// give the hardware's bits (tested on AMX hardware), so the tests of layouts on CPUs without AMX
// check the bits the tiles give.
struct SoftTiles {
  static uint32_t (*T())[16][16] {
    alignas(64) static thread_local uint32_t t[8][16][16];
    return t;
  }
  // (not dtype.h's Bf16ToF32: an inline function compiled here could be the one linked for all)
  static float Bits(uint32_t v) {
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  }
  // DAZ / FTZ: a denormal (zero exponent, nonzero fraction) as a zero of its sign.
  static float Flush(float f) {
    uint32_t v;
    std::memcpy(&v, &f, 4);
    return (v & 0x7F800000u) == 0 ? Bits(v & 0x80000000u) : f;
  }
  static float Low(uint32_t v) { return Flush(Bits(v << 16)); }
  static float High(uint32_t v) { return Flush(Bits(v & 0xFFFF0000u)); }
  static void Configure() {}
  static void Release() {}
  static void ZeroC() { std::memset(T()[4], 0, 4 * sizeof(T()[0])); }
  template <int kA>
  static void LoadA(const void* a) {
    std::memcpy(T()[kA], a, sizeof(T()[0]));
  }
  static void Dp(int c, int a, int b) {
    for (int r = 0; r < 16; ++r) {
      for (int n = 0; n < 16; ++n) {
        float e = 0.0f, o = 0.0f;  // an F32 FMA per product: one rounding each
        for (int p = 0; p < 16; ++p) {
          e = Flush(std::fma(Low(T()[a][r][p]), Low(T()[b][p][n]), e));
          o = Flush(std::fma(High(T()[a][r][p]), High(T()[b][p][n]), o));
        }
        float sum;
        std::memcpy(&sum, &T()[c][r][n], 4);
        sum = Flush(Flush(sum) + Flush(e + o));
        std::memcpy(&T()[c][r][n], &sum, 4);
      }
    }
  }
  template <int kA>
  static void Product(int j, const Bf16TokenTile& b) {
    std::memcpy(T()[2], b.hi, sizeof(T()[0]));
    std::memcpy(T()[3], b.lo, sizeof(T()[0]));
    Dp(4 + j, kA, 2);
    Dp(4 + j, kA, 3);
  }
  static void StoreC(int j, float (*out)[16]) { std::memcpy(out, T()[4 + j], sizeof(T()[0])); }
};

// y[0:m, n0:n1] for F16 or BF16 rows (Rows), plain or packed (f16_packed.h), on token tiles.
template <class Tiles, class Rows, bool kPacked>
void AmxFloatPanel(const void* xv, int m, int k, const void* wv, int n0, int n1, const float* bias,
                   float* y, int ldy) {
  const auto* tiles = static_cast<const Bf16TokenTile*>(xv);
  const int rows = n1 - n0, kcs = k / Rows::kChunk, token_tiles = (m + 15) / 16;
  const uint16_t* w = static_cast<const uint16_t*>(wv) + static_cast<int64_t>(n0) * k;
  const bool whole_groups = kPacked && rows == 16;
  if (kPacked && !whole_groups) {  // the last panel of the matrix: its rows unpacked
    static thread_local std::vector<F16Bits> plain;
    if (plain.size() < static_cast<size_t>(rows) * k) plain.resize(static_cast<size_t>(rows) * k);
    UnpackF16Rows(w, rows, k, &plain.data()->bits);
    w = &plain.data()->bits;
  }
  Tiles::Configure();
  alignas(64) uint32_t a[2][16][16];
  // Token tiles per pass over the panel's chunks, C in tiles 4 and 5. Four (all of C's tiles)
  // would make A half as often, but on the AMX host of 3 Dec each token tile then took twice as
  // long (a harness of the loop, A made apart: 71-102 ns per chunk and token tile against
  // 43-51 for two and 33-38 for one); TinyLlama F16 decode b64 54 -> 70-72 tok/s.
  constexpr int kPerPass = 2;
  // With more passes than one, the first keeps the panel's A (1 KiB per chunk, in L2) for the
  // others: making A (40-45 ns per chunk) does not overlap the tile work on that host.
  const bool keep = token_tiles > kPerPass;
  static thread_local std::vector<AChunk> kept;
  if (keep && kept.size() < static_cast<size_t>(kcs)) kept.resize(kcs);
  for (int t0 = 0; t0 < token_tiles; t0 += kPerPass) {
    const int count = token_tiles - t0 < kPerPass ? token_tiles - t0 : kPerPass;
    Tiles::ZeroC();
    const Bf16TokenTile* b = tiles + static_cast<int64_t>(t0) * kcs;
    for (int kc = 0; kc < kcs; ++kc) {
      uint32_t(*ak)[16] = keep ? kept[kc].a : a[kc & 1];
      if (t0 == 0 || !keep) {
        if (whole_groups) {
          Rows::Packed(w, k, kc, ak);
        } else {
          Rows::Plain(w, k, rows, kc, ak);
        }
      }
      if (kc & 1) {  // the next chunk's A loads while this one's products run
        Tiles::template LoadA<1>(ak);
        for (int j = 0; j < count; ++j) Tiles::template Product<1>(j, b[j * kcs + kc]);
      } else {
        Tiles::template LoadA<0>(ak);
        for (int j = 0; j < count; ++j) Tiles::template Product<0>(j, b[j * kcs + kc]);
      }
    }
    alignas(64) float out[4][16][16];  // [token tile][row][token]
    for (int j = 0; j < count; ++j) Tiles::StoreC(j, out[j]);
    for (int j = 0; j < count; ++j) {
      if (bias != nullptr) {  // added last, as in every other panel
        for (int r = 0; r < rows; ++r) {
          _mm512_store_ps(out[j][r],
                          _mm512_add_ps(_mm512_load_ps(out[j][r]), _mm512_set1_ps(bias[n0 + r])));
        }
      }
      StoreRows(out[j], 16 * (t0 + j), m, rows, y, ldy, n0);
    }
  }
  Tiles::Release();
}

}  // namespace

bool AmxBf16Usable() {
  static const bool usable = [] {
    unsigned a, b, c, d;
    if (!AmxUsable() || __get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    return ((d >> 22) & 1) != 0;  // AMX-BF16
  }();
  return usable;
}

AmxChunkTimes TimeAmxF16Chunks(int chunks) {
  if (!AmxBf16Usable() || chunks <= 0) return {};
  // The panel's operands, all in L1: A in tiles 0 / 1 by chunk parity, a token tile (xh, xl).
  alignas(64) static thread_local uint32_t a[2][16][16];
  alignas(64) static thread_local Bf16TokenTile b;
  std::memset(a, 0, sizeof(a));
  std::memset(&b, 0, sizeof(b));
  using Tiles = HardwareTiles;
  Tiles::Configure();
  Tiles::LoadA<0>(a[0]);
  Tiles::LoadA<1>(a[1]);
  Tiles::Product<0>(0, b);  // tiles 2, 3 hold the token tile from here on
  auto best_ns = [chunks](auto&& body) {
    double best = 1e300;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      body();
      const double ns =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      best = ns < best ? ns : best;
    }
    return best / chunks;
  };
  AmxChunkTimes t;
  t.products_ns = best_ns([chunks] {
    for (int kc = 0; kc < chunks; kc += 2) {
      _tile_dpbf16ps(4, 0, 2);
      _tile_dpbf16ps(4, 0, 3);
      _tile_dpbf16ps(4, 1, 2);
      _tile_dpbf16ps(4, 1, 3);
    }
  });
  t.with_loads_ns = best_ns([chunks] {
    for (int kc = 0; kc < chunks; kc += 2) {
      Tiles::LoadA<0>(a[0]);
      Tiles::Product<0>(0, b);
      Tiles::LoadA<1>(a[1]);
      Tiles::Product<1>(0, b);
    }
  });
  Tiles::Release();
  t.usable = true;
  return t;
}

namespace {

// x (16 floats) as xh and xl, each a bf16 in the upper word of its dword (low words zero): xh
// x's bits with the low 16 cleared, xl = x - xh rounded to nearest even at bit 16.
inline void SplitActivations(__m512 v, __m512i& hi, __m512i& lo) {
  const __m512i high = _mm512_set1_epi32(-65536);
  hi = _mm512_and_si512(_mm512_castps_si512(v), high);
  const __m512i rest = _mm512_castps_si512(_mm512_sub_ps(v, _mm512_castsi512_ps(hi)));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(rest, 16), _mm512_set1_epi32(1));
  lo = _mm512_and_si512(_mm512_add_epi32(rest, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))),
                        high);
}

// The 16 x 16 dwords of v transposed: afterwards v[p] holds dword p of each v[t] in lane t.
// (Two unpack stages make each 128-bit lane hold one dword of four rows, then a 4 x 4
// transpose of the lanes: 64 shuffles. The tiles were made with a 16-dword scatter per token
// and chunk before, 7-12x slower on the AMX host of 3 Dec.)
inline void Transpose16x16(__m512i v[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  __m512i u[4][4];  // u[g][j], lane l: dword 4 l + j of rows 4 g .. 4 g + 3
  for (int g = 0; g < 4; ++g) {
    u[g][0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[g][1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[g][2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[g][3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i a = _mm512_shuffle_i32x4(u[0][j], u[1][j], 0x44),
                  b = _mm512_shuffle_i32x4(u[0][j], u[1][j], 0xEE),
                  c = _mm512_shuffle_i32x4(u[2][j], u[3][j], 0x44),
                  d = _mm512_shuffle_i32x4(u[2][j], u[3][j], 0xEE);
    v[j] = _mm512_shuffle_i32x4(a, c, 0x88);
    v[4 + j] = _mm512_shuffle_i32x4(a, c, 0xDD);
    v[8 + j] = _mm512_shuffle_i32x4(b, d, 0x88);
    v[12 + j] = _mm512_shuffle_i32x4(b, d, 0xDD);
  }
}

// Every (token tile, chunk) of the m rows: Row(row, c, hi, lo) writes a row's dwords of chunk c
// (hi, lo: its row of the tile before the transpose), zeros for the rows past m. In parallel over
// the tiles' chunks where the work is large enough to pay for the threads.
template <class Row>
void MakeTokenTiles(const float* x, int m, int k, int kcs, Bf16TokenTile* out, Row row) {
  const int items = (m + 15) / 16 * kcs;
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * k >= (1 << 16))
  for (int item = 0; item < items; ++item) {
    const int t = item / kcs, c = item % kcs;
    __m512i hi[16], lo[16];
    for (int r = 0; r < 16; ++r) {
      const int i = 16 * t + r;
      if (i < m) {
        row(x + static_cast<int64_t>(i) * k, c, hi[r], lo[r]);
      } else {
        hi[r] = lo[r] = _mm512_setzero_si512();
      }
    }
    Transpose16x16(hi);
    Transpose16x16(lo);
    for (int p = 0; p < 16; ++p) {
      _mm512_store_si512(out[item].hi[p], hi[p]);
      _mm512_store_si512(out[item].lo[p], lo[p]);
    }
  }
}

}  // namespace

void MakeBf16TokenTiles(const float* x, int m, int k, Bf16TokenTile* out) {
  MakeTokenTiles(x, m, k, k / 16, out, [](const float* xr, int c, __m512i& hi, __m512i& lo) {
    SplitActivations(_mm512_loadu_ps(xr + 16 * c), hi, lo);
    hi = _mm512_or_si512(hi, _mm512_srli_epi32(hi, 16));  // the value in both words
    lo = _mm512_or_si512(lo, _mm512_srli_epi32(lo, 16));
  });
}

void MakeBf16PairTokenTiles(const float* x, int m, int k, Bf16TokenTile* out) {
  MakeTokenTiles(x, m, k, k / 32, out, [](const float* xr, int c, __m512i& hi, __m512i& lo) {
    // the upper words of 32 dwords (two registers), in order
    const __m512i odd_words =
        _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                         25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i hi0, lo0, hi1, lo1;
    SplitActivations(_mm512_loadu_ps(xr + 32 * c), hi0, lo0);
    SplitActivations(_mm512_loadu_ps(xr + 32 * c + 16), hi1, lo1);
    hi = _mm512_permutex2var_epi16(hi0, odd_words, hi1);
    lo = _mm512_permutex2var_epi16(lo0, odd_words, lo1);
  });
}

namespace {

template <class Tiles>
MatmulBlockPanelFn FloatTilesPanel(DType t) {
  switch (t) {
    case DType::kF16:
      return AmxFloatPanel<Tiles, F16Rows, false>;
    case DType::kF16Packed:
      return AmxFloatPanel<Tiles, F16Rows, true>;
    case DType::kBF16:
      return AmxFloatPanel<Tiles, Bf16Rows, false>;
    case DType::kBF16Packed:
      return AmxFloatPanel<Tiles, Bf16Rows, true>;
    default:
      return nullptr;
  }
}

}  // namespace

MatmulBlockPanelFn AmxFloatTilesPanel(DType t) {
  return FloatTilesPanel<HardwareTiles>(t);
}
MatmulBlockPanelFn SoftFloatTilesPanel(DType t) {
  return FloatTilesPanel<SoftTiles>(t);
}

}  // namespace llm::kernels::internal
