// The CPU backend: host memory, a synchronous stream, and the kernels of kernels/cpu_ops.h.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "kernels/backend.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu_ops.h"

namespace llm::kernels {

bool BackendCaps::SupportsWeightFormat(DType f) const {
  for (DType d : weight_formats) {
    if (d == f) return true;
  }
  return false;
}

bool BackendCaps::SupportsKvCacheDtype(DType t) const {
  return std::find(kv_cache_dtypes.begin(), kv_cache_dtypes.end(), t) != kv_cache_dtypes.end();
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Release();
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.owner_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::Release() {
  if (owner_ && data_) owner_->Free(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

// Buffers are aligned for the widest SIMD loads (and cache lines).
constexpr size_t kAlignment = 64;

std::atomic<bool> g_huge_pages_wanted{true};

// The huge-page buffers and their mapped lengths (the others are aligned_alloc's). Never
// destroyed: a Buffer in some static object may be released after the backend's own statics.
struct HugeBuffers {
  std::mutex mu;
  std::unordered_map<void*, size_t> mapped;
};
HugeBuffers& Huge() {
  static auto* h = new HugeBuffers;
  return *h;
}

bool ThpUsable() {
  static const bool usable = [] {
    const std::string mode = TransparentHugePageMode();
    return mode == "always" || mode == "madvise";
  }();
  return usable;
}

}  // namespace

void SetCpuHugePages(bool on) {
  g_huge_pages_wanted.store(on, std::memory_order_relaxed);
}

bool CpuHugePages() {
  return g_huge_pages_wanted.load(std::memory_order_relaxed) && ThpUsable();
}

namespace {

class CpuBackendImpl final : public Backend {
 public:
  CpuBackendImpl() {
    caps_.name = "cpu";
    // Every file format, and the packed 32-block layouts its PrepareMatmulWeight makes.
    for (int t = 0; t < kNumMatmulFormats; ++t)
      caps_.weight_formats.push_back(static_cast<DType>(t));
    caps_.max_head_dim = kMaxHeadDim;
    caps_.max_block_size = kMaxBlockSize;
    caps_.memory_bytes = 0;
    caps_.host_memory = true;
    caps_.kv_cache_dtypes = {DType::kF32, DType::kF16};
  }

  const BackendCaps& caps() const override { return caps_; }

  StatusOr<Buffer> Allocate(size_t bytes) override {
    if (bytes == 0) return Buffer();
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < bytes)
      return ResourceExhausted("allocation of " + std::to_string(bytes) + " bytes");
    void* p = nullptr;
    if (bytes >= kHugePageBytes && CpuHugePages()) {
      size_t mapped = 0;
      p = AllocateHugePageAligned(bytes, &mapped);
      if (p != nullptr) {
        std::lock_guard<std::mutex> lock(Huge().mu);
        Huge().mapped[p] = mapped;
      }
    } else {
      p = std::aligned_alloc(kAlignment, rounded);
    }
    if (!p) {
      return ResourceExhausted("cpu backend: cannot allocate " + std::to_string(bytes >> 20) +
                               " MiB of host memory");
    }
    return Buffer(this, p, bytes);
  }
  void Zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  Status Synchronize() override { return Status::Ok(); }

  void Matmul(const float* x, int m, const Weight& w, const float* bias, float* y) override {
    kernels::Matmul(x, m, w.cols, w.data, w.format, w.rows, bias, y);
  }
  void MatmulSameInput(const float* x, int m, const MatmulOut* outs, int count) override {
    for (int first = 0; first < count; first += kMaxSameInputJobs) {
      MatmulJob jobs[kMaxSameInputJobs];
      const int n = std::min(kMaxSameInputJobs, count - first);
      bool same_cols = true;
      for (int i = 0; i < n; ++i) {
        const Weight& w = *outs[first + i].w;
        jobs[i] = {w.data, w.format, w.rows, outs[first + i].bias, outs[first + i].y};
        same_cols = same_cols && w.cols == outs[first].w->cols;
      }
      if (same_cols) {
        kernels::MatmulSameInput(x, m, outs[first].w->cols, jobs, n);
      } else {
        Backend::MatmulSameInput(x, m, outs + first, n);
      }
    }
  }
  size_t PreparedWeightBytes(const Weight& w, bool keep_layout, bool pooled) const override {
    if (w.empty()) return 0;
    const size_t bytes = RowBytes(w.format, w.cols) * static_cast<size_t>(w.rows);
    const DType packed = keep_layout ? w.format : MatmulPackedFormat(w.format);
    if (packed != w.format) return bytes;
    // No layout of our own: read in place, or copied into huge pages (see SetCpuHugePages). On
    // its own a weight under 2 MiB would get no huge page; pooled with the others, it does.
    if (!CpuHugePages() || (!pooled && bytes < kHugePageBytes)) return 0;
    return bytes;
  }
  void PrepareMatmulWeightInto(Weight& w, bool keep_layout, void* dst) override {
    const DType packed = keep_layout ? w.format : MatmulPackedFormat(w.format);
    if (packed == w.format) {
      std::memcpy(dst, w.data, RowBytes(w.format, w.cols) * static_cast<size_t>(w.rows));
    } else {
      PackRows(w.format, w.data, w.rows, w.cols, dst);
    }
    w.data = dst;
    w.format = packed;
  }
  void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps,
               float* out) override {
    kernels::RmsNorm(x, weight, rows, dim, eps, out);
  }
  void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim,
                  float eps, float* out) override {
    kernels::AddRmsNorm(residual, x, weight, rows, dim, eps, out);
  }
  void Rope(float* x, const int32_t* positions, int tokens, int heads, const RopeLayout& layout,
            const float* inv_freq) override {
    kernels::Rope(x, positions, tokens, heads, layout, inv_freq);
  }
  void SiluMul(const float* gate, const float* up, int64_t count, float* out) override {
    kernels::SiluMul(gate, up, count, out);
  }
  void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) override {
    kernels::GeluTanhMul(gate, up, count, out);
  }
  void Scale(float* x, float s, int64_t count) override { kernels::Scale(x, s, count); }
  void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count,
                      int cols, float* dst) override {
    kernels::ScatterAddRows(src, rows, scale, count, cols, dst);
  }
  void Add(float* x, const float* y, int64_t count) override { kernels::Add(x, y, count); }
  void AddBias(float* x, const float* bias, int rows, int cols) override {
    kernels::AddBias(x, bias, rows, cols);
  }
  void Embedding(const int32_t* ids, int tokens, const Weight& table, int first_id,
                 float* out) override {
    kernels::Embedding(ids, tokens, table.data, table.format, table.rows, table.cols, first_id,
                       out);
  }
  void GatherRows(const float* src, const int32_t* rows, int count, int cols, float* dst) override {
    kernels::GatherRows(src, rows, count, cols, dst);
  }
  void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                       const int32_t* slot_mapping, int block_size, void* k_cache, void* v_cache,
                       DType cache_dtype) override {
    if (cache_dtype == DType::kF16) {
      kernels::ReshapeAndCacheF16(k, v, tokens, kv_heads, head_dim, slot_mapping, block_size,
                                  static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache));
    } else {
      kernels::ReshapeAndCache(k, v, tokens, kv_heads, head_dim, slot_mapping, block_size,
                               static_cast<float*>(k_cache), static_cast<float*>(v_cache));
    }
  }
  void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                      const AttentionBatch& batch, const AttentionParams& params,
                      float* out) override {
    kernels::PagedAttention(q, k_cache, v_cache, batch, params, out);
  }

 protected:
  void Free(void* data) override {
    {
      HugeBuffers& h = Huge();
      std::lock_guard<std::mutex> lock(h.mu);
      if (auto it = h.mapped.find(data); it != h.mapped.end()) {
        FreeHugePageAligned(data, it->second);
        h.mapped.erase(it);
        return;
      }
    }
    std::free(data);
  }

 private:
  BackendCaps caps_;
};

}  // namespace

Backend& CpuBackend() {
  static CpuBackendImpl backend;
  return backend;
}

}  // namespace llm::kernels
