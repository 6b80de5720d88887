// kernel_bench: speed of the CPU kernels (not a test). Prints GFLOP/s and GB/s of Matmul for F32,
// BF16, F16, Q8_0 (as stored, packed at every call, and packed as the engine loads it), Q4_K,
// Q6_K, Q2_K and packed Q3_K weights at m = 1, 4, 8, 16, 32, 64, 128 (and
// 512 for the quantized ones) on a 4096 x 4096 weight (in L3; packed F16 at m = 16 and 64 also
// from DRAM), and PagedAttention for a decode batch and a prefill (`kernel_bench matmul` or
// `kernel_bench attention` runs one). `kernel_bench gemv` (only when named) prints the GEMV GB/s
// of every weight format and ISA, in cache and from DRAM. `--dtype` keeps only the formats named
// (matmul, gemv). `kernel_bench amx` (only when named) times the AMX-BF16 tile work of the F16
// panel on each core, alone and all at once. Threads: OMP_NUM_THREADS. Matmul ISA:
// LLM_MATMUL_ISA to force a lower one.
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/cli.h"
#include "common/dtype.h"
#include "kernels/backend.h"
#include "kernels/cpu/f16_row_panels.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/kquant_packed.h"
#include "kernels/cpu/legacy_packed.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/q1_0_row_panels.h"
#include "kernels/cpu/q8_0.h"
#include "kernels/cpu_ops.h"

namespace {

using llm::DType;
namespace kn = llm::kernels;

// Runs fn until at least min_s seconds have passed (after one warm-up); returns seconds per call.
template <class Fn>
double TimeIt(Fn fn, double min_s = 0.5) {
  fn();
  int reps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    fn();
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < min_s);
  return elapsed / reps;
}

std::vector<uint16_t> To16(const std::vector<float>& f, DType t) {
  std::vector<uint16_t> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    out[i] = t == DType::kF16 ? llm::F32ToF16(f[i]) : llm::F32ToBf16(f[i]);
  }
  return out;
}

// Bytes a round robin over weight matrices must span to be read from DRAM: 256 MB, or twice the
// L3 where that is more (a Xeon VM here reports 480 MiB).
size_t DramRoundRobinBytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max<size_t>(256u << 20, l3 > 0 ? 2 * static_cast<size_t>(l3) : 0);
}

// Whether every name in `only` is a format of `types` (else says which are, on stderr).
bool KnownTypes(const char* part, const std::vector<std::string>& only,
                std::span<const DType> types) {
  for (const std::string& name : only) {
    if (std::none_of(types.begin(), types.end(),
                     [&](DType t) { return name == llm::DTypeName(t); })) {
      std::string known;
      for (DType t : types) known += std::string(known.empty() ? "" : ", ") + llm::DTypeName(t);
      std::fprintf(stderr, "kernel_bench %s: --dtype '%s' is none of: %s\n", part, name.c_str(),
                   known.c_str());
      return false;
    }
  }
  return true;
}
bool Wanted(const std::vector<std::string>& only, DType t) {
  return only.empty() || std::find(only.begin(), only.end(), llm::DTypeName(t)) != only.end();
}

bool BenchMatmul(const std::vector<std::string>& only_types) {
  const int k = 4096, n = 4096;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> wf(static_cast<size_t>(n) * k);
  for (float& v : wf) v = d(rng);
  const auto wbf = To16(wf, DType::kBF16), wh = To16(wf, DType::kF16);
  std::vector<uint16_t> whp(wh.size());  // the engine's F16 layout (f16_packed.h)
  kn::internal::PackF16Rows(wh.data(), n, k, whp.data());
  std::vector<uint16_t> whr(wh.size());  // ... on the AVX-512 sets (f16_row_panels.h)
  kn::internal::PackF16RowPanels(wh.data(), n, k, whr.data());
  std::vector<kn::internal::BlockQ8_0> wq(wf.size() / llm::kQ8BlockSize);
  for (int r = 0; r < n; ++r) {
    kn::internal::QuantizeRowQ8_0(wf.data() + static_cast<size_t>(r) * k, k,
                                  wq.data() + static_cast<size_t>(r) * (k / llm::kQ8BlockSize));
  }
  // Q8_0 also in the engine's layout (legacy_packed.h): "Q8_0" alone packs at every call
  std::vector<uint8_t> wq8p(llm::RowBytes(DType::kQ8_0Packed, k) * n);
  kn::PackRows(DType::kQ8_0, wq.data(), n, k, wq8p.data());
  std::vector<uint8_t> wq4k(llm::RowBytes(DType::kQ4_K, k) * n),
      wq6k(llm::RowBytes(DType::kQ6_K, k) * n);
  kn::QuantizeRows(DType::kQ4_K, wf.data(), n, k, wq4k.data());
  kn::QuantizeRows(DType::kQ6_K, wf.data(), n, k, wq6k.data());
  // Q2_K, and Q3_K in the layout the CPU backend gives it (bit planes, kquant_packed.h)
  std::vector<uint8_t> wq2k(llm::RowBytes(DType::kQ2_K, k) * n),
      wq3k(llm::RowBytes(DType::kQ3_K, k) * n), wq3kp(wq3k.size());
  kn::QuantizeRows(DType::kQ2_K, wf.data(), n, k, wq2k.data());
  kn::QuantizeRows(DType::kQ3_K, wf.data(), n, k, wq3k.data());
  kn::internal::PackQ3KBlocks(
      wq3k.data(), static_cast<int64_t>(wq3k.size() / llm::BlockBytes(DType::kQ3_K)), wq3kp.data());
  // Q1_0 in both of the CPU backend's layouts (legacy_packed.h, q1_0_row_panels.h)
  std::vector<uint8_t> wq1(llm::RowBytes(DType::kQ1_0, k) * n), wq1p(wq1.size()), wq1r(wq1.size());
  kn::QuantizeRows(DType::kQ1_0, wf.data(), n, k, wq1.data());
  kn::internal::PackLegacyRows(DType::kQ1_0, wq1.data(), n, k, wq1p.data());
  kn::internal::PackQ1_0RowPanels(wq1.data(), n, k, wq1r.data());
  std::vector<float> x(static_cast<size_t>(512) * k), y(static_cast<size_t>(512) * n);
  for (float& v : x) v = d(rng);
  std::printf("Matmul k=%d n=%d isa=%s threads=%d\n", k, n, kn::MatmulIsa(), omp_get_max_threads());
  std::printf("  %-5s %5s %10s %10s %10s\n", "dtype", "m", "ms", "GFLOP/s", "GB/s");
  const struct {
    DType t;
    const void* w;
  } cases[] = {{DType::kF32, wf.data()},
               {DType::kBF16, wbf.data()},
               {DType::kF16, wh.data()},
               {DType::kF16Packed, whp.data()},
               {DType::kF16RowPanels, whr.data()},
               {DType::kQ8_0, wq.data()},
               {DType::kQ8_0Packed, wq8p.data()},
               {DType::kQ4_K, wq4k.data()},
               {DType::kQ6_K, wq6k.data()},
               {DType::kQ2_K, wq2k.data()},
               {DType::kQ3_KPacked, wq3kp.data()},
               {DType::kQ1_0Packed, wq1p.data()},
               {DType::kQ1_0RowPanels, wq1r.data()}};
  DType case_types[std::size(cases)];
  for (size_t i = 0; i < std::size(cases); ++i) case_types[i] = cases[i].t;
  if (!KnownTypes("matmul", only_types, case_types)) return false;
  for (const auto& c : cases) {
    if (!Wanted(only_types, c.t)) continue;
    for (int m : {1, 4, 8, 16, 32, 64, 128, 512}) {
      if (m == 512 && !llm::IsBlockFormat(c.t)) continue;  // seconds a call
      const double s = TimeIt([&] { kn::Matmul(x.data(), m, k, c.w, c.t, n, nullptr, y.data()); });
      const double bytes = static_cast<double>(n) * llm::RowBytes(c.t, k) + 4.0 * m * (k + n);
      std::printf("  %-5s %5d %10.3f %10.1f %10.1f\n", llm::DTypeName(c.t), m, s * 1e3,
                  2.0 * m * n * k / s * 1e-9, bytes / s * 1e-9);
    }
  }
  // Batched decode as the engine meets it: the weights from DRAM (a round robin over copies that
  // span DramRoundRobinBytes), not from the L3 the cases above reuse.
  for (const auto& [t, w16] : {std::pair{DType::kF16Packed, &whp}, {DType::kF16RowPanels, &whr}}) {
    if (!Wanted(only_types, t)) continue;
    const size_t bytes = w16->size() * sizeof(uint16_t);
    const int copies = static_cast<int>(DramRoundRobinBytes() / bytes + 1);
    std::vector<std::vector<uint16_t>> far(copies, *w16);
    for (int m : {16, 64}) {
      int next = 0;
      const double s = TimeIt([&] {
        kn::Matmul(x.data(), m, k, far[next].data(), t, n, nullptr, y.data());
        next = (next + 1) % copies;
      });
      std::printf("  %-5s %5d %10.3f %10.1f %10.1f  (weights from DRAM: %d copies)\n",
                  llm::DTypeName(t), m, s * 1e3, 2.0 * m * n * k / s * 1e-9,
                  (static_cast<double>(bytes) + 4.0 * m * (k + n)) / s * 1e-9, copies);
    }
  }
  return true;
}

// GEMV (m = 1, a decode step's matmul) per weight format and ISA: GB/s of weights with the
// weight in cache (2048 x 2048, re-read every call: in L3) and streamed from DRAM (a round robin
// over matrices of 2048 x 5632 spanning DramRoundRobinBytes: above the L3). The DRAM figure at the
// machine's read bandwidth means the kernel keeps up with memory; the cache figure is its compute
// ceiling.
// Returns false (with a message) when only_types names a format it does not run.
bool BenchGemv(const std::vector<std::string>& only_types) {
  const int k = 2048;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> x(k), y(8192);
  for (float& v : x) v = d(rng) * 20;
  const DType types[] = {
      DType::kF16,          DType::kF16Packed,  DType::kF16RowPanels, DType::kBF16,
      DType::kBF16Packed,   DType::kQ8_0,       DType::kQ4_0,         DType::kQ4_0Packed,
      DType::kQ4_1Packed,   DType::kQ8_0Packed, DType::kQ5_0Packed,   DType::kQ5_1Packed,
      DType::kQ4_K,         DType::kQ5_K,       DType::kQ6_K,         DType::kQ3_K,
      DType::kQ3_KPacked,   DType::kQ2_K,       DType::kIQ4_NLPacked, DType::kIQ4_XSPacked,
      DType::kIQ3_S,        DType::kIQ3_XXS,    DType::kIQ2_S,        DType::kIQ2_XS,
      DType::kIQ2_XXS,      DType::kIQ1_M,      DType::kIQ1_S,        DType::kTQ1_0,
      DType::kMXFP4Packed,  DType::kTQ2_0,      DType::kQ1_0Packed,   DType::kNVFP4Packed,
      DType::kQ1_0RowPanels};
  if (!KnownTypes("gemv", only_types, types)) return false;
  const kn::internal::MatmulKernels* isas[kn::internal::kMaxMatmulIsas];
  const int num_isas = kn::internal::AvailableMatmulKernels(isas);
  std::printf(
      "GEMV k=%d threads=%d: GB/s of weights (in cache: 2048 rows; DRAM: 5632-row "
      "matrices, a %zu MiB round robin)\n",
      k, omp_get_max_threads(), DramRoundRobinBytes() >> 20);
  std::printf("  %-13s %-12s %10s %10s\n", "dtype", "isa", "cache", "DRAM");
  for (DType t : types) {
    if (!only_types.empty() &&
        std::find(only_types.begin(), only_types.end(), llm::DTypeName(t)) == only_types.end()) {
      continue;
    }
    const size_t row = llm::RowBytes(t, k);
    const int big_n = 5632;
    const int copies =
        static_cast<int>(std::max<size_t>(2, DramRoundRobinBytes() / (row * big_n) + 1));
    // From the CPU backend, as the engine's weights: in huge pages where it uses them.
    std::vector<kn::Buffer> bufs;
    std::vector<std::span<uint8_t>> mats;
    for (int c = 0; c < copies; ++c) {
      auto b = kn::CpuBackend().Allocate(row * big_n);
      if (!b.ok()) {
        std::fprintf(stderr, "kernel_bench gemv: %s\n", b.status().ToString().c_str());
        return false;
      }
      mats.emplace_back(static_cast<uint8_t*>(b->data()), row * big_n);
      bufs.push_back(std::move(*b));
    }
    for (int c = 0; c < copies; ++c) {
      if (llm::DTypeSize(t) == 2 && !llm::IsBlockFormat(t)) {  // 16-bit: random halves
        // (F16 bits read as BF16 are finite numbers too; any layout of them)
        auto* h = reinterpret_cast<uint16_t*>(mats[c].data());
        for (size_t i = 0; i < mats[c].size() / 2; ++i) h[i] = llm::F32ToF16(d(rng));
      } else if (const DType file =
                     t == DType::kQ1_0RowPanels ? DType::kQ1_0 : kn::internal::FileFormatOf(t);
                 file != t) {
        // random blocks of the file format, repacked as the CPU backend does
        std::vector<uint8_t> q(mats[c].size());
        kn::FillRandomBlocks(file, 10 + c, q.data(),
                             static_cast<int64_t>(q.size() / llm::BlockBytes(file)));
        if (t == DType::kQ1_0RowPanels) {
          kn::internal::PackQ1_0RowPanels(q.data(), big_n, k, mats[c].data());
        } else if (t == DType::kQ1_0Packed) {  // PackRows makes row panels where they run
          kn::internal::PackLegacyRows(file, q.data(), big_n, k, mats[c].data());
        } else {
          kn::PackRows(file, q.data(), big_n, k, mats[c].data());
        }
      } else {
        kn::FillRandomBlocks(t, 10 + c, mats[c].data(),
                             static_cast<int64_t>(mats[c].size() / llm::RowBytes(t, 256)));
      }
    }
    for (int i = 0; i < num_isas; ++i) {
      const auto& ks = *isas[i];
      if ((t == DType::kF16Packed && ks.f16_packed == nullptr) ||
          (t == DType::kF16RowPanels && ks.f16_row_panels == nullptr) ||
          (t == DType::kBF16Packed && ks.bf16_packed == nullptr) ||
          (t == DType::kQ1_0RowPanels && ks.q1_0_row_panels == nullptr)) {
        continue;  // only unpacked there
      }
      const int small_n = 2048;
      const double cache_s = TimeIt(
          [&] {
            kn::internal::MatmulWith(ks, x.data(), 1, k, mats[0].data(), t, small_n, nullptr,
                                     y.data());
          },
          0.3);
      int next = 0;
      const double dram_s = TimeIt(
          [&] {
            kn::internal::MatmulWith(ks, x.data(), 1, k, mats[next].data(), t, big_n, nullptr,
                                     y.data());
            next = (next + 1) % copies;
          },
          0.5);
      std::printf("  %-13s %-12s %10.1f %10.1f\n", llm::DTypeName(t), ks.isa,
                  row * small_n / cache_s * 1e-9, row * big_n / dram_s * 1e-9);
    }
  }
  return true;
}

// Llama-3-8B's attention shape (q_heads, kv_heads, head_dim), TinyLlama-1.1B's, and Gemma-2B's
// (multi-query: one kv head).
struct AttnShape {
  int q_heads, kv_heads, head_dim;
};
constexpr AttnShape kLlama8B{32, 8, 128}, kTinyLlama{32, 4, 64}, kGemma2B{8, 1, 256};

// `seqs` sequences of context `ctx` (the first of `first_ctx` when > 0), each with `q_len` new
// query rows; K/V in `kv` (F32 or F16).
void BenchAttention(const char* label, int seqs, int ctx, int q_len, AttnShape shape = kLlama8B,
                    llm::DType kv = llm::DType::kF32, int first_ctx = 0) {
  kn::AttentionParams p{.q_heads = shape.q_heads,
                        .kv_heads = shape.kv_heads,
                        .head_dim = shape.head_dim,
                        .block_size = 16,
                        .scale = 0.0884f,
                        .sliding_window = 0,
                        .kv_dtype = kv};
  const int max_ctx = first_ctx > ctx ? first_ctx : ctx;
  const int blocks_per_seq = (max_ctx + p.block_size - 1) / p.block_size;
  const int num_blocks = seqs * blocks_per_seq;
  const size_t cache = static_cast<size_t>(num_blocks) * p.block_size * p.kv_heads * p.head_dim;
  const bool half = kv == llm::DType::kF16;
  // One cache per layer, each call reading the next one's, as a forward pass does: with one
  // cache, a context of 4096 keys (16 MiB for Llama-3-8B in F16) stayed in L3 between calls,
  // and the figures were those of cache-resident K/V. 256 MiB of caches stream from DRAM; in
  // huge pages, as the engine's KV cache (engine.huge_pages).
  const size_t elem = half ? 2 : 4;
  const size_t layers = std::max<size_t>(1, (size_t{256} << 20) / (2 * cache * elem));
  const size_t bytes = cache * layers * elem;
  size_t k_mapped = 0, v_mapped = 0;
  char* kc = static_cast<char*>(kn::AllocateHugePageAligned(bytes, &k_mapped));
  char* vc = static_cast<char*>(kn::AllocateHugePageAligned(bytes, &v_mapped));
  if (kc == nullptr || vc == nullptr) {
    std::fprintf(stderr, "kernel_bench attention: cannot map %zu bytes\n", 2 * bytes);
    std::exit(2);
  }
  for (size_t i = 0; i < cache * layers; ++i) {
    if (half) {
      reinterpret_cast<uint16_t*>(kc)[i] = llm::F32ToF16(0.01f);
      reinterpret_cast<uint16_t*>(vc)[i] = llm::F32ToF16(0.02f);
    } else {
      reinterpret_cast<float*>(kc)[i] = 0.01f;
      reinterpret_cast<float*>(vc)[i] = 0.02f;
    }
  }
  size_t layer = 0;
  auto k_cache = [&](size_t l) { return static_cast<const void*>(kc + l * cache * elem); };
  auto v_cache = [&](size_t l) { return static_cast<const void*>(vc + l * cache * elem); };
  std::vector<int32_t> tables(num_blocks), qs(seqs + 1), ctx_len(seqs, ctx);
  if (first_ctx > 0) ctx_len[0] = first_ctx;
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), std::mt19937(2));
  for (int s = 0; s <= seqs; ++s) qs[s] = s * q_len;
  const size_t rows = static_cast<size_t>(seqs) * q_len;
  std::vector<float> q(rows * p.q_heads * p.head_dim, 0.1f), out(q.size());
  kn::AttentionBatch b{seqs, qs.data(), ctx_len.data(), tables.data(), blocks_per_seq};
  const double s = TimeIt([&] {
    kn::PagedAttention(q.data(), k_cache(layer), v_cache(layer), b, p, out.data());
    layer = (layer + 1) % layers;
  });
  // Keys each query row sees (causal), times 2 (K and V) * kv_heads * head_dim * element bytes.
  double keys = 0, cached = 0;
  for (int c : ctx_len) {
    for (int j = 0; j < q_len; ++j) keys += c - q_len + j + 1;
    cached += c;
  }
  const double flops = 4.0 * keys * p.q_heads * p.head_dim;
  const double kv_bytes = 2.0 * cached * p.kv_heads * p.head_dim * (half ? 2 : 4);
  std::printf("  %-8s %-3s %2d/%d x %3d seqs=%3d ctx=%5d q_len=%4d %9.3f ms %8.1f GFLOP/s", label,
              half ? "F16" : "F32", p.q_heads, p.kv_heads, p.head_dim, seqs, max_ctx, q_len,
              s * 1e3, flops / s * 1e-9);
  if (q_len == 1) std::printf(" %8.1f GB/s of K/V", kv_bytes / s * 1e-9);
  std::printf("\n");
  kn::FreeHugePageAligned(kc, k_mapped);
  kn::FreeHugePageAligned(vc, v_mapped);
}

// The F16 tiles panel's tile work per core (TimeAmxF16Chunks), each core alone, then every core
// at once: on a cloud VM a core's AMX unit may be shared with another guest, which this shows as
// a core (or a minute) several times slower than the others.
bool BenchAmx() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    std::perror("kernel_bench amx: sched_getaffinity");
    return false;
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (!kn::internal::TimeAmxF16Chunks(2).usable) {
    std::printf("AMX: no AMX-BF16 tiles here (CPU or kernel), nothing to time\n");
    return true;
  }
  constexpr int kChunks = 1 << 16;
  std::vector<kn::internal::AmxChunkTimes> times(cpus.size());
  auto on = [&](size_t i) {
    return std::thread([&, i] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[i], &one);
      sched_setaffinity(0, sizeof(one), &one);  // best effort: unpinned it still measures
      times[i] = kn::internal::TimeAmxF16Chunks(kChunks);
    });
  };
  std::printf(
      "AMX-BF16 tile work of the F16 panel, ns per 16-k chunk and token tile, best of 5 x %d "
      "(two tdpbf16ps alone; with the A and token-tile loads, operands in L1)\n",
      kChunks);
  for (const bool together : {false, true}) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < cpus.size(); ++i) {
      threads.push_back(on(i));
      if (!together) threads.back().join();
    }
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    for (size_t i = 0; i < cpus.size(); ++i) {
      std::printf("  cpu %3d %-8s products %6.1f  with loads %6.1f\n", cpus[i],
                  together ? "(all)" : "(alone)", times[i].products_ns, times[i].with_loads_ns);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  std::vector<std::string> only_types;
  CLI::App app("CPU kernel throughput (matmul per weight format and ISA, paged attention).",
               "kernel_bench");
  app.add_option("only", only, "run just this part")
      ->check(CLI::IsMember({"matmul", "gemv", "attention", "amx"}));
  app.add_option("--dtype", only_types,
                 "matmul, gemv: only these weight formats, as printed (e.g. Q2_K, \"F16 "
                 "(packed)\")");
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  if (only == "gemv") {
    return BenchGemv(only_types) ? 0 : 2;
  }
  if (only == "amx") return BenchAmx() ? 0 : 2;
  if (only != "attention" && !BenchMatmul(only_types)) return 2;
  if (only == "matmul") return 0;
  std::printf(
      "PagedAttention (q_heads/kv_heads x head_dim) block_size=16 threads=%d, K/V in F32 "
      "or F16 (engine.kv_cache_dtype), from DRAM (a cache per layer, 256 MiB of them)\n",
      omp_get_max_threads());
  for (llm::DType kv : {llm::DType::kF32, llm::DType::kF16}) {
    BenchAttention("decode", 1, 2048, 1, kTinyLlama, kv);
    BenchAttention("decode", 16, 2048, 1, kTinyLlama, kv);  // llm-bench's batch 16 at depth
    BenchAttention("decode", 1, 4096, 1, kLlama8B, kv);
    BenchAttention("decode", 16, 1024, 1, kLlama8B, kv);
    BenchAttention("decode", 4, 4096, 1, kLlama8B, kv);
    BenchAttention("decode", 1, 4096, 1, kGemma2B, kv);
    BenchAttention("mixed", 4, 128, 1, kLlama8B, kv, 4096);  // one at 4096, three at 128
    BenchAttention("prefill", 1, 512, 512, kLlama8B, kv);
    BenchAttention("chunk", 2, 2048, 256, kLlama8B, kv);
  }
  return 0;
}
