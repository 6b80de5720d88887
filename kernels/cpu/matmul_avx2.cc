// AVX2 + FMA + F16C Matmul micro-kernel (compiled with -mavx2 -mfma -mf16c).
// One ymm accumulator (8 lanes) per output element; 16-bit weights are widened to f32 in
// registers. The k tail is copied into zero-padded stack chunks. F16 and BF16 weights may also
// come in groups of 4 interleaved rows (kF16Packed, kBF16Packed: f16_packed.h), with the same
// bits, or in row panels of 16 (matmul_row_panels_avx2.h: one FMA chain per output, the bits of
// the AVX-512 sets' row panels). (The block formats, Q8_0 among them, are in
// matmul_quant_avx2.cc.)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_blocked.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_row_panels_avx2.h"

namespace llm::kernels::internal {
namespace {

struct F32Load {
  using W = float;
  static __m256 Load(const float* p) { return _mm256_loadu_ps(p); }
};

struct F16Load {
  using W = uint16_t;
  static __m256 Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

struct Bf16Load {
  using W = uint16_t;
  static __m256 Load(const uint16_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

// Fixed reduction tree: 8 -> 4 -> 2 -> 1 lanes, adding the upper half onto the lower.
inline float ReduceAdd(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// Where a tile's weight rows are: row j's 8 weights from p (p + 8 <= k) and its k % 8 tail.
template <class W>
struct RowMajorRows {  // the file's layout: row j at w + j * ld
  const W* w;
  int64_t ld;
  int k8;
  const W* Chunk(int j, int p) const { return w + j * ld + p; }
  const W* Tail(int j) const { return w + j * ld + k8; }
  bool Streams() const { return false; }
  void Prefetch(int) const {}
  // A step's weights of rows [0, nr) from weight p, into L2.
  void PrefetchL2(int nr, int p) const {
    for (int j = 0; j < nr; ++j) __builtin_prefetch(w + j * ld + p, 0, 2);
  }
};
struct PackedRows16 {  // rows of one group of r rows of kF16Packed / kBF16Packed (f16_packed.h)
  const uint16_t* group;
  int r;
  int k;
  uintptr_t ahead = g_prefetch.f16_packed;  // PrefetchPackedStep's distances
  uintptr_t l2 = g_prefetch.f16_packed_l2;
  const uint16_t* Chunk(int j, int p) const { return group + F16PackedChunk(r, j, p); }
  const uint16_t* Tail(int j) const { return group + F16PackedTail(r, j, k); }
  // One sequential stream, fetched ahead where the CPU's prefetchers fall short of DRAM speed.
  bool Streams() const { return ahead != 0; }
  void Prefetch(int p) const { PrefetchPackedStep(group, r, p, 8, ahead, l2); }
  // A step's weights of the group (8 of each row, one run of at most a line) from p, into L2.
  void PrefetchL2(int, int p) const { __builtin_prefetch(group + F16PackedChunk(r, 0, p), 0, 2); }
};

template <class Loader>
struct Avx2Micro {
  using W = typename Loader::W;
  static constexpr int kMR = 2;  // 2 x 4 accumulators + 4 weights + 1 x fit in 16 ymm
  static constexpr int kNR = 4;

  template <int MR, int NR>
  static void Tile(const float* x, int64_t ldx, const W* w, int64_t ldw, int k, const float* bias,
                   float* y, int64_t ldy) {
    TileOn<MR, NR>(x, ldx, RowMajorRows<W>{w, ldw, k - k % 8}, k, bias, y, ldy);
  }

  // The same operations for every layout of the weight rows (Rows: RowMajorRows, PackedRows16),
  // in one of two loops: with the software prefetch of rows streamed once from memory (packed
  // rows in a decode batch, Rows::Streams) or without. Every tile, not only a GEMV's: on the
  // Xeon without AMX (2 threads, k = 2048, n = 5632 from DRAM, alternating in one process) m = 2
  // went from 10.4 to 18.1 GB/s, m = 4 7.5 to 9.7. Two loops, not a test in one: in prefill's
  // loop the test alone, prefetching nothing, took m = 512 from 104-110 to 67-84 GFLOP/s.
  template <int MR, int NR, class Rows>
  static void TileOn(const float* x, int64_t ldx, const Rows& w, int k, const float* bias, float* y,
                     int64_t ldy) {
    if (w.Streams()) return TileLoop<true, MR, NR>(x, ldx, w, k, bias, y, ldy);
    TileLoop<false, MR, NR>(x, ldx, w, k, bias, y, ldy);
  }
  template <bool kPrefetch, int MR, int NR, class Rows>
  static void TileLoop(const float* x, int64_t ldx, const Rows& w, int k, const float* bias,
                       float* y, int64_t ldy) {
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    int p = 0;
    for (; p + 8 <= k; p += 8) {
      __m256 wv[NR];
      if constexpr (kPrefetch) w.Prefetch(p);
      for (int j = 0; j < NR; ++j) wv[j] = Loader::Load(w.Chunk(j, p));
      for (int i = 0; i < MR; ++i) {
        const __m256 xv = _mm256_loadu_ps(x + i * ldx + p);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
    if (p < k) {  // zero-padded tail: lanes past k add 0 * 0
      const int rest = k - p;
      __m256 wv[NR];
      for (int j = 0; j < NR; ++j) {
        W buf[8] = {};
        std::memcpy(buf, w.Tail(j), sizeof(W) * rest);
        wv[j] = Loader::Load(buf);
      }
      for (int i = 0; i < MR; ++i) {
        float buf[8] = {};
        std::memcpy(buf, x + i * ldx + p, sizeof(float) * rest);
        const __m256 xv = _mm256_loadu_ps(buf);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
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

// The k-blocked tiles (matmul_blocked.h): 3 x rows by 4 weight rows (12 accumulators + 4 weights
// of the 16 ymm; x is an FMA operand from L1).
template <class Loader>
struct Avx2Blocked {
  using V = __m256;
  using W = typename Loader::W;
  static RowMajorRows<W> RowMajor(const W* w, int k) { return {w, k, k - k % 8}; }
  static PackedRows16 Packed(const uint16_t* group, int r, int k) { return {group, r, k}; }
  static constexpr int kLanes = 8;
  static constexpr int kMR = 3;
  static constexpr int kNR = 4;
  static constexpr bool kSpreadPrefetch = false;  // matmul_blocked.h's PrefetchShare
  static V Load(const float* p) { return _mm256_load_ps(p); }
  static void Store(float* p, V v) { _mm256_store_ps(p, v); }
  static V Fma(V x, V w, V acc) { return _mm256_fmadd_ps(x, w, acc); }
  template <class Rows>
  static V Widen(const Rows& src, int j, int p) {
    return Loader::Load(src.Chunk(j, p));
  }
  template <class Rows>
  static V WidenTail(const Rows& src, int j, int p, int k) {  // the k % 8 tail (p = k8)
    W buf[8] = {};
    std::memcpy(buf, src.Tail(j), sizeof(W) * (k - p));
    return Loader::Load(buf);
  }
  static void Zero(float* acc) { _mm256_store_ps(acc, _mm256_setzero_ps()); }
  static float Reduce(const float* acc) { return ReduceAdd(_mm256_load_ps(acc)); }
};

template <class Loader>
constexpr MatmulPanelFn kRowMajorPanel =
    BlockedRowMajorPanel<Avx2Blocked<Loader>, MatmulPanel<Avx2Micro<Loader>>>;
template <class Loader>
constexpr MatmulPanelFn kPackedPanel =
    BlockedPackedPanel<Avx2Blocked<Loader>, PackedRowsPanel<Avx2Micro<Loader>, PackedRows16>>;

}  // namespace

const MatmulKernels& Avx2MatmulKernels() {
  static const MatmulKernels kKernels = [] {
    MatmulKernels k = {"avx2-fma",
                       kRowMajorPanel<F32Load>,
                       kRowMajorPanel<F16Load>,
                       kRowMajorPanel<Bf16Load>,
                       &Avx2QuantKernels(),
                       kPackedPanel<F16Load>,
                       kPackedPanel<Bf16Load>,
                       kBlockedMinM,
                       kBlockedMaxM};
    k.f16_row_panels = RowPanelsPanel8<F16Widen8>;
    k.bf16_row_panels = RowPanelsPanel8<Bf16Widen8>;
    return k;
  }();
  return kKernels;
}

}  // namespace llm::kernels::internal
