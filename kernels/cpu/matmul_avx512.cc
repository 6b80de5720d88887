// AVX-512 Matmul micro-kernel (compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c).
// One zmm accumulator (16 lanes) per output element; 16-bit weights are widened to f32 in
// registers (exact), so every path accumulates x * w in f32 with FMA. F16 and BF16 weights may
// also come in groups of 4 interleaved rows (kF16Packed, kBF16Packed: f16_packed.h), with the
// same bits. (The block formats, Q8_0 among them, are in matmul_quant_avx512.cc.)
// GCC 12 warns inside its own AVX-512 intrinsics (the `__Y = __Y` of _mm512_undefined_*, GCC bug
// 105593, fixed in GCC 13); nothing in this file reads an uninitialised value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/matmul_blocked.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_row_panels.h"

namespace llm::kernels::internal {
namespace {

struct F32Load {
  using W = float;
  static __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 LoadTail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

struct F16Load {
  using W = uint16_t;
  static __m512 Widen(__m256i h) { return _mm512_cvtph_ps(h); }
  static __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadTail(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};

struct Bf16Load {
  using W = uint16_t;
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Load(const uint16_t* p) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 LoadTail(const uint16_t* p, __mmask16 m) {
    return Widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

// Fixed reduction tree: 16 -> 8 -> 4 -> 2 -> 1 lanes, adding the upper half onto the lower.
inline float ReduceAdd(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// Where a tile's weight rows are, as 16 widened lanes of row j from weight p (p + 16 <= k) or
// the rest of the row from p (zero past k).
template <class Loader>
struct RowMajorRows {  // the file's layout: row j at w + j * ld
  using W = typename Loader::W;
  const W* w;
  int64_t ld;
  __m512 Load(int j, int p) const { return Loader::Load(w + j * ld + p); }
  __m512 LoadTail(int j, int p, __mmask16 m) const { return Loader::LoadTail(w + j * ld + p, m); }
  static constexpr bool kPrefetchEveryTile = false;  // a GEMV's (MR = 1) only
  bool Streams() const { return g_prefetch.f16_gemv != 0; }
  // A step's weights of rows [0, nr) from weight p, into L2.
  void PrefetchL2(int nr, int p) const {
    for (int j = 0; j < nr; ++j) __builtin_prefetch(w + j * ld + p, 0, 2);
  }
  // A GEMV row's software prefetch (g_prefetch.f16_gemv): one line per 2 steps.
  void Prefetch(int nr, int p) const {
    if (g_prefetch.f16_gemv != 0 && (p & 31) == 0) {
      for (int j = 0; j < nr; ++j) {
        __builtin_prefetch(reinterpret_cast<const char*>(w + j * ld + p) + g_prefetch.f16_gemv, 0,
                           3);
      }
    }
  }
};

// One group of r rows of kF16Packed / kBF16Packed (f16_packed.h): 16 weights of a row are two
// of its 8-weight chunks.
template <class Loader>
struct PackedRows16 {
  const uint16_t* group;
  int r;
  int k;
  uintptr_t ahead = g_prefetch.f16_packed;  // PrefetchPackedStep's distances
  uintptr_t l2 = g_prefetch.f16_packed_l2;
  __m512 Load(int j, int p) const {
    const __m128i lo =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + F16PackedChunk(r, j, p)));
    const __m128i hi =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + F16PackedChunk(r, j, p + 8)));
    return Loader::Widen(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  __m512 LoadTail(int j, int p, __mmask16) const {  // the last k - p < 16 weights, zero after
    uint16_t buf[16] = {};
    const int k8 = k - k % kF16PackChunk;
    for (int q = p; q < k; ++q) {
      buf[q - p] = q < k8 ? group[F16PackedChunk(r, j, q - q % kF16PackChunk) + q % kF16PackChunk]
                          : group[F16PackedTail(r, j, k) + (q - k8)];
    }
    return Loader::Load(buf);
  }
  // One sequential stream: Intel's prefetchers leave it under DRAM speed, AMD's follow it
  // (g_prefetch.f16_packed: 0 there). Also in the tiles of 2-5 x rows (decode batches below the
  // blocked panels, which stream the weights once as a GEMV does): on the Xeon without AMX, 2
  // threads, k = 2048, n = 5632 from DRAM, alternating in one process, GB/s medians of 9 without
  // / with: m = 2 11.2-12.5 / 14.4-16.2, m = 3 10.8-11.2 / 13.7-16.6, m = 5 9.5-9.7 / 11.1-12.6.
  static constexpr bool kPrefetchEveryTile = true;
  bool Streams() const { return ahead != 0; }
  void Prefetch(int, int p) const { PrefetchPackedStep(group, r, p, 16, ahead, l2); }
  // A step's weights of the group (16 of each row, one run) from weight p, into L2.
  void PrefetchL2(int, int p) const {
    const auto* at = reinterpret_cast<const char*>(group + F16PackedChunk(r, 0, p));
    for (int b = 0; b < 32 * r; b += 64) __builtin_prefetch(at + b, 0, 2);
  }
};

// kRows: x rows per tile. The packed panels take 6 (6 x 4 accumulators + 4 weights + 1 x = 29 of
// the 32 zmm): each widened weight vector then feeds 6 FMAs instead of 4, and F16 prefill 512 on
// the Xeon went from 79-81 to 84-89 tok/s (alternating runs, 29 Nov 2026). The row-major panels
// keep 4 (their tile table, kTileFns, is 4 x 4). An element's operations never depend on the
// tile shape.
template <class Loader, int kRows = 4>
struct Avx512Micro {
  using W = typename Loader::W;
  static constexpr int kMR = kRows;
  static constexpr int kNR = 4;

  template <int MR, int NR>
  static void Tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int k, const float* bias,
                   float* y, int64_t ldy) {
    TileOn<MR, NR>(x, ldx, RowMajorRows<Loader>{w, ldw}, k, bias, y, ldy);
  }

  // The same operations for every layout of the weight rows (RowMajorRows, PackedRows16), in
  // one of two loops: with the software prefetch (16-bit rows streamed once from memory: a GEMV,
  // or packed rows in any tile of a decode batch, Rows::Streams) or without. Two loops, not a
  // test in one: in prefill's 6 x 4 tile the test alone, prefetching nothing, took TinyLlama F16
  // prefill 512 from 66-74 to 44-48 tok/s.
  template <int MR, int NR, class Rows>
  static void TileOn(const float* x, int64_t ldx, const Rows& w, int k, const float* bias, float* y,
                     int64_t ldy) {
    if constexpr (sizeof(W) == 2 && (MR == 1 || Rows::kPrefetchEveryTile)) {
      if (w.Streams()) return TileLoop<true, MR, NR>(x, ldx, w, k, bias, y, ldy);
    }
    TileLoop<false, MR, NR>(x, ldx, w, k, bias, y, ldy);
  }
  template <bool kPrefetch, int MR, int NR, class Rows>
  static void TileLoop(const float* x, int64_t ldx, const Rows& w, int k, const float* bias,
                       float* y, int64_t ldy) {
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    }
    int p = 0;
    for (; p + 16 <= k; p += 16) {
      __m512 wv[NR];
      if constexpr (kPrefetch) w.Prefetch(NR, p);
      for (int j = 0; j < NR; ++j) wv[j] = w.Load(j, p);
      for (int i = 0; i < MR; ++i) {
        const __m512 xv = _mm512_loadu_ps(x + i * ldx + p);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
    if (p < k) {  // zero-filled tail: lanes past k add 0 * 0
      const __mmask16 mask = static_cast<__mmask16>((1u << (k - p)) - 1);
      __m512 wv[NR];
      for (int j = 0; j < NR; ++j) wv[j] = w.LoadTail(j, p, mask);
      for (int i = 0; i < MR; ++i) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * ldx + p);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        const float s = ReduceAdd(acc[i][j]);
        y[i * ldy + j] = bias != nullptr ? s + bias[j] : s;
      }
    }
  }
};

// The k-blocked tiles (matmul_blocked.h): 6 x rows by 4 weight rows (24 accumulators + 4 weights
// + 1 x of the 32 zmm). Block width 512 against 128 / 256 / 1024 (2 threads, F16 packed, m = 16
// and 64 at k = 2048 and 5632): 195-248 GFLOP/s against 167-189 / 174-201 / 163-233.
template <class Loader>
struct Avx512Blocked {
  using V = __m512;
  using W = typename Loader::W;
  static RowMajorRows<Loader> RowMajor(const W* w, int k) { return {w, k}; }
  static PackedRows16<Loader> Packed(const uint16_t* group, int r, int k) { return {group, r, k}; }
  static constexpr int kLanes = 16;
  static constexpr int kMR = 6;
  static constexpr int kNR = 4;
  static constexpr bool kSpreadPrefetch = true;  // matmul_blocked.h's PrefetchShare
  static V Load(const float* p) { return _mm512_load_ps(p); }
  static void Store(float* p, V v) { _mm512_store_ps(p, v); }
  static V Fma(V x, V w, V acc) { return _mm512_fmadd_ps(x, w, acc); }
  template <class Rows>
  static V Widen(const Rows& src, int j, int p) {
    return src.Load(j, p);
  }
  template <class Rows>
  static V WidenTail(const Rows& src, int j, int p, int k) {
    return src.LoadTail(j, p, static_cast<__mmask16>((1u << (k - p)) - 1));
  }
  static void Zero(float* acc) { _mm512_store_ps(acc, _mm512_setzero_ps()); }
  static float Reduce(const float* acc) { return ReduceAdd(_mm512_load_ps(acc)); }
};

template <class Loader>
constexpr MatmulPanelFn kRowMajorPanel =
    BlockedRowMajorPanel<Avx512Blocked<Loader>, MatmulPanel<Avx512Micro<Loader>>>;
// G whole groups of packed rows (4 G rows, f16_packed.h), one after another: a GEMV tile of 4 G
// rows reads G streams at once. On this project's Xeon with AMX (2 Dec 2026), a TinyLlama-shaped
// sequence of F16 GEMVs from DRAM (22 x q k v o gate up down, then the output; 2 threads,
// alternating in one process, GB/s medians of 30-40 rounds; three runs): one group / two /
// llama.cpp's F16 kernel (6 plain rows at once) 18.1 / 21.9 / 22.0; one / two / four 19.4 /
// 23.4 / 26.4; one / four 15.3 / 20.4.
constexpr int kPanelGroups = 4;  // a panel's 16 rows
template <class Loader, int G>
struct PackedGroups16 {
  const uint16_t* first;
  int k;
  uintptr_t ahead = g_prefetch.f16_packed;
  uintptr_t l2 = g_prefetch.f16_packed_l2;
  PackedRows16<Loader> Group(int j) const {
    return {first + static_cast<int64_t>(j / kF16PackRows) * kF16PackRows * k, kF16PackRows, k,
            ahead, l2};
  }
  __m512 Load(int j, int p) const { return Group(j).Load(j % kF16PackRows, p); }
  __m512 LoadTail(int j, int p, __mmask16 m) const {
    return Group(j).LoadTail(j % kF16PackRows, p, m);
  }
  static constexpr bool kPrefetchEveryTile = true;
  bool Streams() const { return ahead != 0; }
  void Prefetch(int, int p) const {
    for (int g = 0; g < G; ++g) Group(g * kF16PackRows).Prefetch(kF16PackRows, p);
  }
};

template <class Loader>
constexpr MatmulPanelFn kPackedRowsPanel =
    BlockedPackedPanel<Avx512Blocked<Loader>,
                       PackedRowsPanel<Avx512Micro<Loader, 6>, PackedRows16<Loader>>>;

// A GEMV (m = 1) on a whole panel (16 rows): the 4 groups as one tile of 16 rows, 4 streams at
// once (g_prefetch.f16_gemv_groups), else the row tiles a group at a time. A row's operations
// are the same in both (its FMAs over k in order, then its sum): the same bits.
template <class Loader>
void PackedPanel(const float* x, int m, int k, const void* wv, int n0, int n1, const float* bias,
                 float* y, int ldy) {
  constexpr int kGroups = kPanelGroups;
  if (m == 1 && g_prefetch.f16_gemv_groups && n1 - n0 == kGroups * kF16PackRows) {
    PackedGroups16<Loader, kGroups> rows{
        static_cast<const uint16_t*>(wv) + static_cast<int64_t>(n0) * k, k};
    Avx512Micro<Loader, 6>::template TileOn<1, kGroups * kF16PackRows>(
        x, k, rows, k, bias != nullptr ? bias + n0 : nullptr, y + n0, 0);
    return;
  }
  kPackedRowsPanel<Loader>(x, m, k, wv, n0, n1, bias, y, ldy);
}
template <class Loader>
constexpr MatmulPanelFn kPackedPanel = PackedPanel<Loader>;

}  // namespace

const MatmulKernels& Avx512MatmulKernels() {
  static const MatmulKernels kKernels = [] {
    MatmulKernels k = {"avx512",
                       kRowMajorPanel<F32Load>,
                       kRowMajorPanel<F16Load>,
                       kRowMajorPanel<Bf16Load>,
                       &Avx512QuantKernels(),
                       kPackedPanel<F16Load>,
                       kPackedPanel<Bf16Load>,
                       kBlockedMinM,
                       kBlockedMaxM};
    k.f16_row_panels = RowPanelsPanel<F16Widen>;
    k.bf16_row_panels = RowPanelsPanel<Bf16Widen>;
    return k;
  }();
  return kKernels;
}

}  // namespace llm::kernels::internal
