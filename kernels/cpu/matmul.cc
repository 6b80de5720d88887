// Matmul: picks the micro-kernel for this CPU once, then splits the output features (n) into
// panels across OpenMP threads. k is never split, so each element's reduction is fixed.
#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/f16_packed.h"
#include "kernels/cpu/f16_row_panels.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/panel_schedule.h"
#include "kernels/cpu/q1_0_row_panels.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {
namespace internal {

int AvailableMatmulKernels(const MatmulKernels* out[kMaxMatmulIsas]) {
  __builtin_cpu_init();
  int n = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    if (__builtin_cpu_supports("avx512vnni")) {
      if (AmxUsable()) out[n++] = &AmxMatmulKernels();
      out[n++] = &Avx512VnniMatmulKernels();
    }
    out[n++] = &Avx512MatmulKernels();
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    out[n++] = &Avx2MatmulKernels();
  }
  out[n++] = &ScalarMatmulKernels();
  return n;
}

// The CPU's family as cpuid leaf 1 gives it (base + extended family), 0 if unknown: AMD Zen 4 is
// 0x19, Zen 5 0x1A.
static unsigned CpuFamily() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
#else
  return 0;
#endif
}

PrefetchDistances PrefetchDistancesFor(bool is_amd, unsigned family) {
  PrefetchDistances p = is_amd ? PrefetchDistances{4096, 0, 0, 0, false, 0, false, false}
                               : PrefetchDistances{2048, 4096, 2048, 6144, true, 6144, true, true};
  // Batched tiles fetch as far ahead as their GEMVs, but where measured otherwise.
  p.f16_panels_wide = p.f16_packed;
  p.packed_legacy_tiles = p.packed_legacy;
  if (is_amd && family >= 0x1A) {  // Zen 5 and later
    p.kquant_l1 = 6144;
    p.kquant_tiles = 8192;
    p.f16_packed = 2048;
    p.f16_panels_wide = 4096;
    p.packed_legacy_tiles = 8192;
  }
  return p;
}

PrefetchDistances g_prefetch = [] {
  __builtin_cpu_init();
  return PrefetchDistancesFor(__builtin_cpu_is("amd"), CpuFamily());
}();

bool Q8_0GemvOnAvx2(const char* env, bool has_avx2, bool is_amd) {
  if (!has_avx2) return false;
  if (env != nullptr) {
    if (std::strcmp(env, "0") == 0) return false;
    if (std::strcmp(env, "1") == 0) return true;
    std::fprintf(stderr,
                 "LLM_Q8_0_GEMV_AVX2: expected 0 or 1, got '%.32s'; using the default (%d)\n", env,
                 is_amd ? 1 : 0);
  }
  return is_amd;
}

bool g_q8_0_gemv_avx2 = [] {
  __builtin_cpu_init();
  return Q8_0GemvOnAvx2(std::getenv("LLM_Q8_0_GEMV_AVX2"),
                        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                            __builtin_cpu_supports("f16c"),
                        __builtin_cpu_is("amd"));
}();

void ReorderChunksQ8K(BlockQ8_K* x, int nb, Q8KOrder order) {
  for (int b = 0; b < nb; ++b) {
    int8_t natural[kQK_K];
    std::memcpy(natural, x[b].qs, kQK_K);
    for (int h = 0; h < 8; ++h)
      std::memcpy(x[b].qs + 32 * Q8KChunkAt(order, h), natural + 32 * h, 32);
  }
}

int Q8KTokenTileCount(int m) {
  const int tiles = (m + 15) / 16;
  return tiles + (tiles & 1);
}

// Fills every token slot of `tiles` tiles of nb blocks: fill(tile, slot,
// block) with token 16 t + slot's block b, or nullptr past m (a slot to zero).
template <class Tile, class Block, class Fill>
void MakeTokenTiles(const Block* x, int m, int nb, int tiles, Tile* out, Fill fill) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * nb >= 256)
  for (int tb = 0; tb < tiles * nb; ++tb) {
    const int t = tb / nb, b = tb % nb;
    for (int e = 0; e < 16; ++e) {
      const int i = 16 * t + e;
      fill(out[tb], e, i < m ? &x[static_cast<int64_t>(i) * nb + b] : nullptr);
    }
  }
}

void MakeQ8KTokenTiles(const BlockQ8_K* x, int m, int nb, Q8KTokenTile* out) {
  MakeTokenTiles(x, m, nb, Q8KTokenTileCount(m), out,
                 [](Q8KTokenTile& o, int e, const BlockQ8_K* xb) {
                   for (int l = 0; l < 8; ++l) {
                     for (int h = 0; h < 8; ++h) {
                       if (xb != nullptr) {
                         std::memcpy(o.q[l][h][e], xb->qs + 32 * h + 4 * l, 4);
                       } else {
                         std::memset(o.q[l][h][e], 0, 4);
                       }
                     }
                     o.bsum_pairs[l][e] = 0;  // (a pair of int16 zeros)
                     if (xb != nullptr) std::memcpy(&o.bsum_pairs[l][e], xb->bsums + 2 * l, 4);
                   }
                   o.d[e] = xb != nullptr ? xb->d : 0.0f;
                 });
}

void MakeQ8_0TokenTiles(const BlockQ8_0* x, int m, int nb, Q8_0TokenTile* out) {
  MakeTokenTiles(x, m, nb, (m + 15) / 16, out, [](Q8_0TokenTile& o, int e, const BlockQ8_0* xb) {
    int32_t sum = 0;
    for (int h = 0; h < 8; ++h) {
      if (xb != nullptr) {
        std::memcpy(o.q[h][e], xb->qs + 4 * h, 4);
      } else {
        std::memset(o.q[h][e], 0, 4);
      }
    }
    if (xb != nullptr) {
      for (int j = 0; j < kQ8BlockSize; ++j) sum += xb->qs[j];
    }
    o.d[e] = xb != nullptr ? F16ToF32(xb->d) : 0.0f;
    o.s[e] = static_cast<float>(sum);
  });
}

// Rows of a packed layout back in their file format `base` (PackRows' inverse).
static void UnpackRows(DType base, const uint8_t* src, int rows, int cols, uint8_t* dst) {
  if (base == DType::kQ3_K) {
    UnpackQ3KBlocks(src, static_cast<int64_t>(rows) * (cols / kQK_K), dst);
  } else {
    UnpackLegacyRows(base, src, rows, cols, dst);
  }
}

// Whether this kernel set reads the packed layout of a block format (t: the format or its
// layout) as it is; else (the scalar set; AVX2 for Q3_K) its rows are unpacked per panel.
bool NativePacked(const MatmulKernels& ks, DType t) {
  const DType packed = PackedLayoutOf(FileFormatOf(t));
  return packed != FileFormatOf(t) && ks.quant->fn[static_cast<int>(packed)] != nullptr;
}

// Weight rows per parallel work item. Small enough to load-balance n = 2048 over 16 threads,
// large enough that a panel is many cache lines of weights.
constexpr int kPanelRows = 16;
static_assert(kPanelRows % kF16PackRows == 0, "a panel starts a kF16Packed group");
// F16 row panels (f16_row_panels.h) go four to a work item: a GEMV reads them as four streams.
constexpr int kRowPanelCallRows = 4 * kF16PanelRows;
constexpr int PanelRowsOf(DType t) {
  return t == DType::kF16RowPanels || t == DType::kBF16RowPanels ? kRowPanelCallRows : kPanelRows;
}

int64_t FloatBlocksSize(int m, int k) {
  const int64_t chunks = (m + kFloatBlockRows - 1) / kFloatBlockRows;
  const int64_t blocks = (k + kFloatBlockK - 1) / kFloatBlockK;
  return chunks * blocks * kFloatBlockRows * kFloatBlockK;
}

void MakeFloatBlocksRow(const float* xi, int i, int k, float* out) {
  const int blocks = (k + kFloatBlockK - 1) / kFloatBlockK;
  float* row = out +
               static_cast<int64_t>(i / kFloatBlockRows) * blocks * kFloatBlockRows * kFloatBlockK +
               static_cast<int64_t>(i % kFloatBlockRows) * kFloatBlockK;
  for (int b = 0; b < blocks; ++b) {
    float* dst = row + static_cast<int64_t>(b) * kFloatBlockRows * kFloatBlockK;
    const int p0 = b * kFloatBlockK, n = std::min(kFloatBlockK, k - p0);
    std::copy(xi + p0, xi + p0 + n, dst);
    std::fill(dst + n, dst + kFloatBlockK, 0.0f);
  }
}

void MakeFloatBlocks(const float* x, int m, int k, float* out) {
  for (int i = 0; i < m; ++i) MakeFloatBlocksRow(x + static_cast<int64_t>(i) * k, i, k, out);
}

namespace {

// The forms of the input rows a panel reads: float (F32, F16, BF16 weights), Q8_0 (the 32-block
// formats on the scalar set: ggml's vec_dot_type), Q8_K (K-quants), Q8_K with its chunks paired
// or halved (the AVX-512 panels of Q4_K / Q5_K and of Q2_K / Q3_K, Q8KOrder), PackedX groups (the
// packed 32-block kernels, legacy_packed.h) and Q8_K / Q8_0 token tiles (the AMX panels).
enum InputForm {
  kFloatInput,
  kQ8_0Input,
  kQ8_KInput,
  kQ8_KPairedInput,
  kQ8_KHalvedInput,
  kPackedXInput,
  kQ8_KTilesInput,
  kQ8_0TilesInput,
  kFloatBlocksInput,
  kBf16TilesInput,
  kBf16PairTilesInput,
  kRowPanelTokensInput,
  kQ1_0TablesInput,
  kNumInputForms
};

// The 16-bit float formats' panels on tiles and the token tiles they read; panel null: none
// (then the float panels run, at every m).
struct FloatTiles {
  MatmulBlockPanelFn panel;
  InputForm form;
};
FloatTiles FloatTilesFor(const MatmulKernels& ks, DType t, int k) {
  if ((t == DType::kF16 || t == DType::kF16Packed) && k % 16 == 0) {
    return {t == DType::kF16 ? ks.f16_tiles : ks.f16_packed_tiles, kBf16TilesInput};
  }
  if ((t == DType::kBF16 || t == DType::kBF16Packed) && k % 32 == 0) {
    return {t == DType::kBF16 ? ks.bf16_tiles : ks.bf16_packed_tiles, kBf16PairTilesInput};
  }
  return {nullptr, kFloatInput};
}

InputForm FormFor(const MatmulKernels& ks, DType t, int m, int k) {
  if (t == DType::kQ1_0RowPanels) {  // the table GEMV, the panel GEMM, or Q1_0's kernels
    const InputForm unpacked = FormFor(ks, DType::kQ1_0, m, k);
    if (ks.q1_0_row_panels == nullptr || unpacked == kQ8_0TilesInput) return unpacked;
    return m <= kQ1_0LutMaxRows ? kQ1_0TablesInput : kPackedXInput;
  }
  if ((t == DType::kF16RowPanels && ks.f16_row_panels != nullptr) ||
      (t == DType::kBF16RowPanels && ks.bf16_row_panels != nullptr)) {
    return m == 1 ? kFloatInput : kRowPanelTokensInput;
  }
  // every m where float_tiles_min_m is 1: batch invariance
  if (const FloatTiles ft = FloatTilesFor(ks, t, k);
      ft.panel != nullptr && m >= ks.float_tiles_min_m) {
    return ft.form;
  }
  if (ks.quant->tiles[static_cast<int>(t)] != nullptr && m >= ks.quant->tiles_min_m) {
    return IsKQuant(t) ? kQ8_KTilesInput : kQ8_0TilesInput;
  }
  if (DecodesAsIQ(t)) return kQ8_KInput;
  if (IsKQuant(t)) {  // Q8_K, packed layout (kQ3_KPacked) or not
    switch (ks.quant->x_order[static_cast<int>(t)]) {
      case Q8KOrder::kPairs:
        return kQ8_KPairedInput;
      case Q8KOrder::kHalves:
        return kQ8_KHalvedInput;
      default:
        return kQ8_KInput;
    }
  }
  if (PackedLayoutOf(t) != t || FileFormatOf(t) != t) {
    return NativePacked(ks, t) ? kPackedXInput : kQ8_0Input;
  }
  if (!IsBlockFormat(t) && ks.float_blocks_min_m > 0 && m >= ks.float_blocks_min_m &&
      m <= ks.float_blocks_max_m) {
    return kFloatBlocksInput;
  }
  return kFloatInput;
}

// How many token tiles the float tiles' panels take at once, for token tiles of `chunks` 2 KiB
// chunks each: every 16-row panel reads all of them, so past L2 they come from L3 for each
// panel (TinyLlama F16 prefill on an AMX host: the B tile loads take the time). A slice of
// tokens whose tiles fill at most 1.5 MiB stays in L2 across the panels, and the weights are
// read once per slice instead. A token's bits are the same in any slice (the panels' tiles
// sum a token's chunks in order whatever its tile and its place in it).
int TokenSliceTiles(int64_t chunks) {
  constexpr int64_t kSliceBytes = 3 << 19;
  return static_cast<int>(std::clamp<int64_t>(kSliceBytes / (chunks * 2048), 1, 4));
}

// The quantized input rows, per thread (buffers that only grow).
struct QuantizedInputs {
  std::vector<BlockQ8_0> q8_0;
  std::vector<BlockQ8_K> q8_k, q8_k_paired, q8_k_halved;
  std::vector<PackedXGroup> packed_x;
  std::vector<Q8KTokenTile> q8_k_tiles;
  std::vector<Q8_0TokenTile> q8_0_tiles;
  std::vector<float> float_blocks;
  std::vector<Bf16TokenTile> bf16_tiles, bf16_pair_tiles;
  std::vector<float> row_panel_tokens;
};

// Returns the float blocks (64-byte aligned) when need[kFloatBlocksInput], else null.
float* QuantizeInputs(const float* x, int m, int k, const bool need[kNumInputForms],
                      QuantizedInputs& in) {
  const int nb0 = k / kQ8BlockSize, nbk = k / kQK_K;
  const bool kquant =
      need[kQ8_KInput] || need[kQ8_KPairedInput] || need[kQ8_KHalvedInput] || need[kQ8_KTilesInput];
  const bool q8_0 =
      need[kQ8_0Input] || need[kPackedXInput] || need[kQ8_0TilesInput] || need[kQ1_0TablesInput];
  if (q8_0 && in.q8_0.size() < static_cast<size_t>(m) * nb0) {
    in.q8_0.resize(static_cast<size_t>(m) * nb0);
  }
  if (kquant && in.q8_k.size() < static_cast<size_t>(m) * nbk) {
    in.q8_k.resize(static_cast<size_t>(m) * nbk);
  }
  if (need[kQ8_KPairedInput] && in.q8_k_paired.size() < static_cast<size_t>(m) * nbk) {
    in.q8_k_paired.resize(static_cast<size_t>(m) * nbk);
  }
  if (need[kQ8_KHalvedInput] && in.q8_k_halved.size() < static_cast<size_t>(m) * nbk) {
    in.q8_k_halved.resize(static_cast<size_t>(m) * nbk);
  }
  const int groups = PackedXGroups(nb0);
  if (need[kPackedXInput] && in.packed_x.size() < static_cast<size_t>(m) * groups) {
    in.packed_x.resize(static_cast<size_t>(m) * groups);
  }
  if (need[kFloatBlocksInput]) {
    const auto size = static_cast<size_t>(FloatBlocksSize(m, k)) + 16;  // + alignment
    if (in.float_blocks.size() < size) in.float_blocks.resize(size);
  }
  const int token_tiles = (m + 15) / 16;
  if (need[kBf16TilesInput] && in.bf16_tiles.size() < static_cast<size_t>(token_tiles) * (k / 16)) {
    in.bf16_tiles.resize(static_cast<size_t>(token_tiles) * (k / 16));
  }
  if (need[kBf16PairTilesInput] &&
      in.bf16_pair_tiles.size() < static_cast<size_t>(token_tiles) * (k / 32)) {
    in.bf16_pair_tiles.resize(static_cast<size_t>(token_tiles) * (k / 32));
  }
  // 64-byte aligned: each block row is whole cache lines
  float* const float_blocks =
      need[kFloatBlocksInput]
          ? reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(in.float_blocks.data()) + 63) &
                                     ~uintptr_t{63})
          : nullptr;
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(m) * k >= (1 << 16))
  for (int i = 0; i < m; ++i) {
    const float* xr = x + static_cast<int64_t>(i) * k;
    BlockQ8_0* xq = q8_0 ? in.q8_0.data() + static_cast<int64_t>(i) * nb0 : nullptr;
    if (q8_0) QuantizeRowQ8_0(xr, k, xq);
    BlockQ8_K* const xk = kquant ? in.q8_k.data() + static_cast<int64_t>(i) * nbk : nullptr;
    if (kquant) QuantizeRowQ8_K(xr, k, xk);
    // the row again, its chunks reordered (with the other rows')
    if (need[kQ8_KPairedInput]) {
      BlockQ8_K* const paired = in.q8_k_paired.data() + static_cast<int64_t>(i) * nbk;
      std::copy(xk, xk + nbk, paired);
      ReorderChunksQ8K(paired, nbk, Q8KOrder::kPairs);
    }
    if (need[kQ8_KHalvedInput]) {
      BlockQ8_K* const halved = in.q8_k_halved.data() + static_cast<int64_t>(i) * nbk;
      std::copy(xk, xk + nbk, halved);
      ReorderChunksQ8K(halved, nbk, Q8KOrder::kHalves);
    }
    if (need[kFloatBlocksInput]) MakeFloatBlocksRow(xr, i, k, float_blocks);
    if (need[kPackedXInput]) {
      MakePackedX(xq, nb0, in.packed_x.data() + static_cast<int64_t>(i) * groups);
    }
  }
  if (need[kBf16TilesInput]) MakeBf16TokenTiles(x, m, k, in.bf16_tiles.data());
  if (need[kRowPanelTokensInput]) {
    const auto size = static_cast<size_t>(RowPanelTokensSize(m, k));
    if (in.row_panel_tokens.size() < size) in.row_panel_tokens.resize(size);
    MakeRowPanelTokens(x, m, k, in.row_panel_tokens.data());
  }
  if (need[kBf16PairTilesInput]) MakeBf16PairTokenTiles(x, m, k, in.bf16_pair_tiles.data());
  if (need[kQ8_KTilesInput]) {
    const size_t tiles = static_cast<size_t>(Q8KTokenTileCount(m)) * nbk;
    if (in.q8_k_tiles.size() < tiles) in.q8_k_tiles.resize(tiles);
    MakeQ8KTokenTiles(in.q8_k.data(), m, nbk, in.q8_k_tiles.data());
  }
  if (need[kQ8_0TilesInput]) {
    const size_t tiles = static_cast<size_t>((m + 15) / 16) * nb0;
    if (in.q8_0_tiles.size() < tiles) in.q8_0_tiles.resize(tiles);
    MakeQ8_0TokenTiles(in.q8_0.data(), m, nb0, in.q8_0_tiles.data());
  }
  return need[kFloatBlocksInput] ? float_blocks : nullptr;
}

// The Q1_0 tables of the m Q8_0 rows at x for the calling thread, made on its first panel of
// matmul call `call`: each thread makes its own copy. Shared from the thread that quantized the
// rows they cost more than making them: the other core reads them fresh from this one's cache
// (Zen 4, k = 2048, 2 threads: 25.1 us a GEMV with one copy against 15.6-15.9 with a copy each).
const void* ThreadQ1_0Tables(const MatmulKernels& ks, uint64_t call, const BlockQ8_0* x, int m,
                             int k) {
  static thread_local std::vector<Q1_0SubTables> tables;
  static thread_local uint64_t made_for = 0;
  const int nb = k / kQ8BlockSize;
  const int64_t row_bytes = Q1_0LutRowBytes(nb);
  if (made_for != call) {
    const auto units =
        static_cast<size_t>(m * row_bytes / static_cast<int64_t>(sizeof(Q1_0SubTables)) + 1);
    if (tables.size() < units) tables.resize(units);
    auto* out = reinterpret_cast<uint8_t*>(tables.data());
    for (int i = 0; i < m; ++i)
      ks.q1_0_tables(x + static_cast<int64_t>(i) * nb, nb, out + i * row_bytes);
    made_for = call;
  }
  return tables.data();
}

}  // namespace

void MatmulSameInputWith(const MatmulKernels& ks, const float* x, int m, int k,
                         const MatmulJob* jobs, int count) {
  if (m <= 0 || count <= 0) return;
  if (count > kMaxSameInputJobs) {
    MatmulSameInputWith(ks, x, m, k, jobs, kMaxSameInputJobs);
    MatmulSameInputWith(ks, x, m, k, jobs + kMaxSameInputJobs, count - kMaxSameInputJobs);
    return;
  }
  static thread_local QuantizedInputs inputs;
  static std::atomic<uint64_t> calls{0};
  const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;  // ThreadQ1_0Tables'
  bool need[kNumInputForms] = {};
  InputForm forms[kMaxSameInputJobs];  // each job's
  for (int j = 0; j < count; ++j) need[forms[j] = FormFor(ks, jobs[j].type, m, k)] = true;
  const float* float_blocks = QuantizeInputs(x, m, k, need, inputs);
  const void* input[kNumInputForms] = {x,
                                       inputs.q8_0.data(),
                                       inputs.q8_k.data(),
                                       inputs.q8_k_paired.data(),
                                       inputs.q8_k_halved.data(),
                                       inputs.packed_x.data(),
                                       inputs.q8_k_tiles.data(),
                                       inputs.q8_0_tiles.data(),
                                       float_blocks,
                                       inputs.bf16_tiles.data(),
                                       inputs.bf16_pair_tiles.data(),
                                       inputs.row_panel_tokens.data(),
                                       inputs.q8_0.data()};  // made into tables per thread
  // One parallel loop over the panels of every job, in order: one barrier for all of them.
  int first_panel[kMaxSameInputJobs + 1] = {0};
  int64_t work = 0;
  for (int j = 0; j < count; ++j) {
    const int rows = PanelRowsOf(jobs[j].type);
    first_panel[j + 1] = first_panel[j] + (jobs[j].n + rows - 1) / rows;
    work += static_cast<int64_t>(m) * jobs[j].n * k;
  }
  const int panels = first_panel[count];
  // The float tiles' token slice [16 t0, 16 t0 + 16 slice_tiles) of the m rows (all of them but
  // where TokenSliceTiles cuts them).
  int t0 = 0, slice_tiles = (m + 15) / 16;
  auto run = [&](int p) {
    int j = 0;
    while (p >= first_panel[j + 1]) ++j;
    const MatmulJob& job = jobs[j];
    const int panel_rows = PanelRowsOf(job.type);
    const int n0 = (p - first_panel[j]) * panel_rows, n1 = std::min(job.n, n0 + panel_rows);
    const InputForm form = forms[j];
    const void* in = input[form];
    if (form == kBf16TilesInput || form == kBf16PairTilesInput) {
      const int r0 = 16 * t0, rows = std::min(m - r0, 16 * slice_tiles);
      const int64_t chunks = k / (form == kBf16TilesInput ? 16 : 32);
      FloatTilesFor(ks, job.type, k)
          .panel(static_cast<const Bf16TokenTile*>(in) + t0 * chunks, rows, k, job.w, n0, n1,
                 job.bias, job.y + static_cast<int64_t>(r0) * job.n, job.n);
      return;
    }
    if (job.type == DType::kQ1_0RowPanels) {
      if (form == kQ1_0TablesInput) {
        ks.q1_0_row_panels(ThreadQ1_0Tables(ks, call, static_cast<const BlockQ8_0*>(in), m, k), m,
                           k, job.w, n0, n1, job.bias, job.y, job.n);
        return;
      }
      if (form == kPackedXInput && ks.q1_0_row_panels_gemm != nullptr) {
        ks.q1_0_row_panels_gemm(in, m, k, job.w, n0, n1, job.bias, job.y, job.n);
        return;
      }
      // no panel kernels in this set, or the AMX tiles: the rows as Q1_0 rows, and its kernels
      const size_t row = RowBytes(DType::kQ1_0, k);
      static thread_local std::vector<uint8_t> unpacked;
      if (unpacked.size() < row * kPanelRows) unpacked.resize(row * kPanelRows);
      UnpackQ1_0RowPanels(static_cast<const uint8_t*>(job.w) + row * n0, n1 - n0, k,
                          unpacked.data());
      const auto& fns = form == kQ8_0TilesInput ? ks.quant->tiles : ks.quant->fn;
      fns[static_cast<int>(DType::kQ1_0)](in, m, k, unpacked.data(), 0, n1 - n0,
                                          job.bias != nullptr ? job.bias + n0 : nullptr, job.y + n0,
                                          job.n);
      return;
    }
    if (form == kQ8_KTilesInput || form == kQ8_0TilesInput) {
      ks.quant->tiles[static_cast<int>(job.type)](in, m, k, job.w, n0, n1, job.bias, job.y, job.n);
      return;
    }
    const auto* xf = static_cast<const float*>(in);  // the float formats' (plain or blocks)
    switch (job.type) {
      case DType::kF32:
        ks.f32(xf, m, k, job.w, n0, n1, job.bias, job.y, job.n);
        break;
      case DType::kF16:
        ks.f16(xf, m, k, job.w, n0, n1, job.bias, job.y, job.n);
        break;
      case DType::kBF16:
        ks.bf16(xf, m, k, job.w, n0, n1, job.bias, job.y, job.n);
        break;
      case DType::kF16RowPanels:
      case DType::kBF16RowPanels: {
        const bool f16 = job.type == DType::kF16RowPanels;
        if (MatmulPanelFn row_panels = f16 ? ks.f16_row_panels : ks.bf16_row_panels;
            row_panels != nullptr) {
          row_panels(xf, m, k, job.w, n0, n1, job.bias, job.y, job.n);
          break;
        }
        // no row-panel kernel in this set: its F16 / BF16 panel on the rows unpacked
        static thread_local std::vector<uint16_t> unpacked;
        if (unpacked.size() < static_cast<size_t>(k) * kRowPanelCallRows) {
          unpacked.resize(static_cast<size_t>(k) * kRowPanelCallRows);
        }
        UnpackF16RowPanels(static_cast<const uint16_t*>(job.w) + static_cast<int64_t>(n0) * k,
                           n1 - n0, k, unpacked.data());
        (f16 ? ks.f16 : ks.bf16)(xf, m, k, unpacked.data(), 0, n1 - n0,
                                 job.bias != nullptr ? job.bias + n0 : nullptr, job.y + n0, job.n);
        break;
      }
      case DType::kF16Packed:
      case DType::kBF16Packed: {
        const bool f16 = job.type == DType::kF16Packed;
        if (MatmulPanelFn packed = f16 ? ks.f16_packed : ks.bf16_packed; packed != nullptr) {
          packed(xf, m, k, job.w, n0, n1, job.bias, job.y, job.n);
          break;
        }
        // no packed panel in this set: its F16 / BF16 panel on the rows unpacked
        static thread_local std::vector<uint16_t> unpacked;
        if (unpacked.size() < static_cast<size_t>(k) * kPanelRows) {
          unpacked.resize(static_cast<size_t>(k) * kPanelRows);
        }
        UnpackF16Rows(static_cast<const uint16_t*>(job.w) + static_cast<int64_t>(n0) * k, n1 - n0,
                      k, unpacked.data());
        (f16 ? ks.f16 : ks.bf16)(xf, m, k, unpacked.data(), 0, n1 - n0,
                                 job.bias != nullptr ? job.bias + n0 : nullptr, job.y + n0, job.n);
        break;
      }
      case DType::kQ4_0Packed:
      case DType::kQ4_1Packed:
      case DType::kQ5_0Packed:
      case DType::kQ5_1Packed:
      case DType::kQ8_0Packed:
      case DType::kIQ4_NLPacked:
      case DType::kIQ4_XSPacked:
      case DType::kMXFP4Packed:
      case DType::kQ1_0Packed:
      case DType::kNVFP4Packed:
      case DType::kQ3_KPacked:
        if (!NativePacked(ks, job.type)) {  // no packed kernel here: the format's, unpacked
          const DType base = FileFormatOf(job.type);
          const size_t row = RowBytes(base, k);
          static thread_local std::vector<uint8_t> unpacked;
          if (unpacked.size() < row * kPanelRows) unpacked.resize(row * kPanelRows);
          UnpackRows(base, static_cast<const uint8_t*>(job.w) + row * n0, n1 - n0, k,
                     unpacked.data());
          ks.quant->fn[static_cast<int>(base)](in, m, k, unpacked.data(), 0, n1 - n0,
                                               job.bias != nullptr ? job.bias + n0 : nullptr,
                                               job.y + n0, job.n);
          break;
        }
        if (m == 1 && job.type == DType::kQ8_0Packed && g_q8_0_gemv_avx2 &&
            ks.quant != &Avx2QuantKernels()) {
          Avx2QuantKernels().fn[static_cast<int>(job.type)](in, m, k, job.w, n0, n1, job.bias,
                                                            job.y, job.n);
          break;
        }
        [[fallthrough]];
      default:
        ks.quant->fn[static_cast<int>(job.type)](in, m, k, job.w, n0, n1, job.bias, job.y, job.n);
        break;
    }
  };
  const int threads = work >= (1 << 18) ? std::min(omp_get_max_threads(), panels) : 1;
  auto run_all = [&] {
    if (threads <= 1) {
      for (int p = 0; p < panels; ++p) run(p);
      return;
    }
    // One contiguous range of panels per thread, the tails stolen (panel_schedule.h).
    static thread_local PanelSchedule schedule_of_caller;
    PanelSchedule& schedule = schedule_of_caller;  // the team shares the caller's
    schedule.Reset(panels, threads);
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      for (int p = schedule.Next(t); p >= 0; p = schedule.Next(t)) run(p);
    }
  };
  const int token_tiles = slice_tiles;
  bool tiles_only = true;
  for (int j = 0; j < count; ++j) {
    const bool tiles = forms[j] == kBf16TilesInput || forms[j] == kBf16PairTilesInput;
    tiles_only = tiles_only && tiles;
    if (tiles) {
      slice_tiles =
          std::min(slice_tiles, TokenSliceTiles(forms[j] == kBf16TilesInput ? k / 16 : k / 32));
    }
  }
  if (!tiles_only) slice_tiles = token_tiles;
  for (t0 = 0; t0 < token_tiles; t0 += slice_tiles) run_all();
}

void MatmulWith(const MatmulKernels& ks, const float* x, int m, int k, const void* w, DType w_type,
                int n, const float* bias, float* y) {
  if (n <= 0) return;
  const MatmulJob job{w, w_type, n, bias, y};
  MatmulSameInputWith(ks, x, m, k, &job, 1);
}

}  // namespace internal

namespace {

const internal::MatmulKernels& SelectKernels() {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int count = internal::AvailableMatmulKernels(avail);
  if (const char* want = std::getenv("LLM_MATMUL_ISA")) {
    for (int i = 0; i < count; ++i) {
      if (std::strcmp(avail[i]->isa, want) == 0) return *avail[i];
    }
  }
  return *avail[0];
}

// Chosen once (SelectMatmulIsa, or on first use); the pointer is published atomically.
std::atomic<const internal::MatmulKernels*> g_kernels{nullptr};

const internal::MatmulKernels& Kernels() {
  const internal::MatmulKernels* k = g_kernels.load(std::memory_order_acquire);
  if (k == nullptr) {
    const internal::MatmulKernels* chosen = &SelectKernels();
    g_kernels.compare_exchange_strong(k, chosen, std::memory_order_acq_rel);
    k = g_kernels.load(std::memory_order_acquire);
  }
  return *k;
}

}  // namespace

Status SelectMatmulIsa(const std::string& isa) {
  const internal::MatmulKernels* avail[internal::kMaxMatmulIsas];
  const int count = internal::AvailableMatmulKernels(avail);
  if (isa == "auto") {
    g_kernels.store(&SelectKernels(), std::memory_order_release);
    return Status::Ok();
  }
  std::string names;
  for (int i = 0; i < count; ++i) {
    if (isa == avail[i]->isa) {
      g_kernels.store(avail[i], std::memory_order_release);
      return Status::Ok();
    }
    names += std::string(names.empty() ? "" : ", ") + avail[i]->isa;
  }
  return InvalidArgument("engine.matmul_isa '" + isa +
                         "' is not available on this CPU (available: " + names + ", auto)");
}

void Matmul(const float* x, int m, int k, const void* w, DType w_type, int n, const float* bias,
            float* y) {
  internal::MatmulWith(Kernels(), x, m, k, w, w_type, n, bias, y);
}

void MatmulSameInput(const float* x, int m, int k, const MatmulJob* jobs, int count) {
  internal::MatmulSameInputWith(Kernels(), x, m, k, jobs, count);
}

DType MatmulPackedFormat(DType t) {
  const char* off = std::getenv("LLM_PACK_WEIGHTS");
  if (off != nullptr && std::strcmp(off, "0") == 0) return t;
  if (t == DType::kF16 || t == DType::kBF16) {
    const bool f16 = t == DType::kF16;
    // The AMX tiles (LLM_AMX_F16) read the groups of 4; so does LLM_F16_ROW_PANELS=0.
    const char* panels = std::getenv("LLM_F16_ROW_PANELS");
    const bool no_panels = panels != nullptr && std::strcmp(panels, "0") == 0;
    if ((f16 ? Kernels().f16_row_panels : Kernels().bf16_row_panels) != nullptr &&
        Kernels().f16_tiles == nullptr && !no_panels) {
      return f16 ? DType::kF16RowPanels : DType::kBF16RowPanels;
    }
    if (f16) return Kernels().f16_packed != nullptr ? DType::kF16Packed : t;
    return Kernels().bf16_packed != nullptr ? DType::kBF16Packed : t;
  }
  if (t == DType::kQ1_0 && Kernels().q1_0_row_panels != nullptr) {
    // LLM_Q1_0_ROW_PANELS=0: kQ1_0Packed (to compare them)
    const char* panels = std::getenv("LLM_Q1_0_ROW_PANELS");
    if (panels == nullptr || std::strcmp(panels, "0") != 0) return DType::kQ1_0RowPanels;
  }
  const DType p = internal::PackedLayoutOf(t);
  return p != t && internal::NativePacked(Kernels(), t) ? p : t;
}

void PackRows(DType t, const void* src, int64_t rows, int cols, void* dst) {
  const size_t row = RowBytes(t, cols);
  constexpr int64_t kRowsPerItem = 64;  // a multiple of kF16PackRows, kF16PanelRows: whole groups
  const DType to = MatmulPackedFormat(t);
#pragma omp parallel for schedule(static)
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerItem) {
    const int64_t count = std::min(kRowsPerItem, rows - r0);
    if (t == DType::kQ3_K) {
      internal::PackQ3KBlocks(static_cast<const uint8_t*>(src) + r0 * row, count * (cols / kQK_K),
                              static_cast<uint8_t*>(dst) + r0 * row);
    } else if (to == DType::kQ1_0RowPanels) {
      internal::PackQ1_0RowPanels(static_cast<const uint8_t*>(src) + r0 * row, count, cols,
                                  static_cast<uint8_t*>(dst) + r0 * row);
    } else if (to == DType::kF16RowPanels || to == DType::kBF16RowPanels) {
      internal::PackF16RowPanels(static_cast<const uint16_t*>(src) + r0 * cols, count, cols,
                                 static_cast<uint16_t*>(dst) + r0 * cols);
    } else if (t == DType::kF16 || t == DType::kBF16) {
      internal::PackF16Rows(static_cast<const uint16_t*>(src) + r0 * cols, count, cols,
                            static_cast<uint16_t*>(dst) + r0 * cols);
    } else {
      internal::PackLegacyRows(t, static_cast<const uint8_t*>(src) + r0 * row, count, cols,
                               static_cast<uint8_t*>(dst) + r0 * row);
    }
  }
}

const char* MatmulIsa() {
  return Kernels().isa;
}

int MatmulFloatTilesMinM() {
  return Kernels().f16_tiles != nullptr ? Kernels().float_tiles_min_m : 0;
}

}  // namespace llm::kernels
