// The kernel backend interface: everything the forward pass asks of a compute device, in the
// spirit of ggml's backends. The model (worker/model) calls only this interface, so a new device
// (CUDA) or a new weight format (a quantized block format) is a new implementation or a new
// `Weight` format, never a branch in the model.
//
// Memory: a backend hands out `Buffer`s in its own memory (host memory for the CPU backend,
// device memory for a GPU). Every pointer passed to an op points into such memory, except where
// an op says otherwise. Ops are enqueued on the backend's one stream and may return before they
// finish (the CPU backend's stream is synchronous); CopyToHost and Synchronize wait. An op that
// fails says so at the next Synchronize, which returns the first error since the one before.
// Thread affinity: one caller at a time (the rank's engine thread); the CPU backend fans each op
// out on OpenMP threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace llm::kernels {

// A tensor in a backend's memory tagged with its format: a row-major [rows, cols] matrix as a
// Hugging Face nn.Linear stores it, or a vector (rows == 1). `data == nullptr` means absent
// (a bias the model does not have). The memory is owned elsewhere (a Buffer, a mapped file).
struct Weight {
  const void* data = nullptr;
  DType format = DType::kF32;
  int rows = 0;
  int cols = 0;

  bool empty() const { return data == nullptr; }
  int64_t numel() const { return static_cast<int64_t>(rows) * cols; }
};

// What a backend can do; asked once at start-up, so that limits are checked with an error
// naming the config key instead of being copied as literals.
struct BackendCaps {
  std::string name;                   // "cpu", "cuda:0"
  std::vector<DType> weight_formats;  // formats Matmul and Embedding accept
  int max_head_dim = 0;               // PagedAttention / Rope limit
  int max_block_size = 0;             // KV cache block size limit (tokens)
  size_t memory_bytes = 0;            // device memory; 0 for host memory (ask the OS)
  bool host_memory = false;           // buffers are plain host memory the CPU may read
  // Element types of the KV cache ReshapeAndCache writes and PagedAttention reads.
  std::vector<DType> kv_cache_dtypes = {DType::kF32};

  bool SupportsWeightFormat(DType f) const;
  bool SupportsKvCacheDtype(DType t) const;
};

class Backend;

// Memory from a backend, freed by it when the Buffer goes away. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Release(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void Release();
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A flat varlen batch for PagedAttention: sequence s owns query rows
// [query_start[s], query_start[s + 1]) and has context_len[s] tokens in the cache including those
// new rows, so its query row j sits at position context_len[s] - q_len + j and attends causally to
// positions <= its own. block_tables is [num_seqs, max_blocks_per_seq]: logical block i of
// sequence s is physical block block_tables[s * max_blocks_per_seq + i].
struct AttentionBatch {
  int num_seqs = 0;
  const int32_t* query_start = nullptr;  // num_seqs + 1 entries
  const int32_t* context_len = nullptr;  // num_seqs entries
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  // query_start[num_seqs] (the rows of q and out), known on the host: a device backend sizes
  // its launch with it without reading query_start back.
  int num_tokens = 0;
};

// Which lanes of each head RoPE rotates and how they pair up.
struct RopeLayout {
  int head_dim = 0;    // lanes per head (the stride between heads)
  int rotary_dim = 0;  // the first rotary_dim lanes rotate (even, <= head_dim); the rest pass
  // Pairs (2i, 2i + 1) (GPT-J, GLM) instead of rotate-half's (i, i + rotary_dim / 2) (NEOX,
  // Hugging Face's default).
  bool interleaved = false;
  // cos and sin multiplied by mscale (LongRoPE's attention_factor): the rotated lanes scale by
  // it, the passed ones do not. 1: plain RoPE (a multiply by 1 is exact).
  float mscale = 1.0f;
};

struct AttentionParams {
  int q_heads = 0;
  int kv_heads = 0;  // q_heads % kv_heads == 0 (GQA/MQA)
  int head_dim = 0;
  int block_size = 16;
  float scale = 1.0f;      // applied to q·k
  int sliding_window = 0;  // > 0: query at p sees keys at p - window < j <= p (Mistral, Qwen2)
  float softcap = 0.0f;    // > 0: scores become tanh(s / softcap) * softcap (Gemma 2)
  // Element type of the K and V caches: kF32, or kF16 (half the memory and the bandwidth; each
  // value rounded to nearest once, when written).
  DType kv_dtype = DType::kF32;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const BackendCaps& caps() const = 0;

  // Memory. Allocate fails with ResourceExhausted (never aborts).
  virtual StatusOr<Buffer> Allocate(size_t bytes) = 0;
  virtual void Zero(void* dst, size_t bytes) = 0;
  virtual void CopyToDevice(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;  // waits
  virtual Status Synchronize() = 0;

  // y[m, w.rows] = x[m, w.cols] · W^T (+ bias[w.rows] when bias != nullptr), float32
  // accumulation. Batch invariant: a row of y is bitwise the same whatever m and the row's index.
  virtual void Matmul(const float* x, int m, const Weight& w, const float* bias, float* y) = 0;
  // Several Matmuls of the same x (q, k and v; gate and up), each bitwise what Matmul gives. A
  // backend may run them as one (the CPU's: one activation quantization, one parallel loop);
  // this default runs them one by one.
  struct MatmulOut {
    const Weight* w;
    const float* bias;  // may be null
    float* y;
  };
  virtual void MatmulSameInput(const float* x, int m, const MatmulOut* outs, int count) {
    for (int i = 0; i < count; ++i) Matmul(x, m, *outs[i].w, outs[i].bias, outs[i].y);
  }
  // out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for t < rows. In place is allowed.
  virtual void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps,
                       float* out) = 0;
  // residual += x, then out = RmsNorm(residual): the residual add fused with the next norm.
  virtual void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim,
                          float eps, float* out) = 0;
  // Rotary embedding in place on x[t, head, :layout.head_dim]: pair i of the first
  // layout.rotary_dim lanes rotates by positions[t] * inv_freq[i] (rotary_dim / 2 entries).
  virtual void Rope(float* x, const int32_t* positions, int tokens, int heads,
                    const RopeLayout& layout, const float* inv_freq) = 0;
  // Once at load, before the weight's first use: a backend may give a matmul weight a layout of
  // its own that its Matmul reads faster (the CPU backend repacks Q4_0 ... Q5_1 for its SIMD
  // kernels, kernels/cpu/legacy_packed.h), or a copy in memory it reads faster (the CPU
  // backend's huge pages). PreparedWeightBytes says how many bytes that layout or copy takes (0:
  // w is read where it is); PrepareMatmulWeightInto writes it to `dst` (that many bytes, 64-byte
  // aligned, in memory of this backend) and points w.data and w.format at it (w.format the same,
  // or a backend layout such as DType::kQ4_0Packed, which only Matmul and MatmulSameInput may be
  // given). Bitwise the same results either way. keep_layout: w is also read by other ops (a tied
  // embedding table, which Embedding reads), so only a copy in the same layout is allowed.
  // pooled: the copy shares one allocation with the model's other weights (PrepareMatmulWeights
  // in worker/model), so copying a small weight pays off too (the CPU backend's huge pages).
  virtual size_t PreparedWeightBytes(const Weight& w, bool keep_layout, bool pooled) const {
    (void)w;
    (void)keep_layout;
    (void)pooled;
    return 0;
  }
  virtual void PrepareMatmulWeightInto(Weight& w, bool keep_layout, void* dst) {
    (void)w;
    (void)keep_layout;
    (void)dst;
  }
  // One weight on its own: the Buffer holding its layout or copy (w pointing at it), or an empty
  // Buffer and `w` unchanged.
  StatusOr<Buffer> PrepareMatmulWeight(Weight& w, bool keep_layout = false) {
    const size_t bytes = PreparedWeightBytes(w, keep_layout, /*pooled=*/false);
    if (bytes == 0) return Buffer();
    StatusOr<Buffer> buf = Allocate(bytes);
    if (!buf.ok()) return buf.status();
    PrepareMatmulWeightInto(w, keep_layout, buf->data());
    return buf;
  }
  // out[i] = silu(gate[i]) * up[i].
  virtual void SiluMul(const float* gate, const float* up, int64_t count, float* out) = 0;
  // out = gelu_tanh(gate) * up (Gemma's gelu_pytorch_tanh)
  virtual void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) = 0;
  // x *= s (Gemma's embedding scale; final-logit soft-capping is on the host)
  virtual void Scale(float* x, float s, int64_t count) = 0;
  // dst[rows[i], :] += scale[i] * src[i, :] for i < count; rows are distinct within one call
  // (mixture of experts: an expert's outputs weighted back into the tokens' rows)
  virtual void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count,
                              int cols, float* dst) = 0;
  // x[i] += y[i].
  virtual void Add(float* x, const float* y, int64_t count) = 0;
  // x[r, :] += bias[:] for every row r < rows.
  virtual void AddBias(float* x, const float* bias, int rows, int cols) = 0;
  // out[t] = table[ids[t] - first_id] for ids in [first_id, first_id + table.rows), else a zero
  // row (a vocab-parallel shard holds the rows from first_id on).
  virtual void Embedding(const int32_t* ids, int tokens, const Weight& table, int first_id,
                         float* out) = 0;
  // dst[i, :] = src[rows[i], :] for i < count.
  virtual void GatherRows(const float* src, const int32_t* rows, int count, int cols,
                          float* dst) = 0;
  // Writes each new token's K and V into the paged cache [num_blocks, block_size, kv_heads,
  // head_dim] of `cache_dtype` elements (one of caps().kv_cache_dtypes; kF16: rounded to
  // nearest even) at slot_mapping[t] (block = slot / block_size); a negative slot is skipped.
  virtual void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads,
                               int head_dim, const int32_t* slot_mapping, int block_size,
                               void* k_cache, void* v_cache, DType cache_dtype) = 0;
  // out[t, h] = softmax_j(scale * q[t, h] · K[j, h / group]) · V[j, h / group] over the keys the
  // query may see. Batch invariant: a row's output does not depend on the rest of the batch,
  // on how its sequence's queries were chunked, or on the thread count.
  // The caches hold params.kv_dtype elements.
  virtual void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                              const AttentionBatch& batch, const AttentionParams& params,
                              float* out) = 0;

  // Graphs (CUDA graphs): the ops enqueued between BeginCapture and EndCapture are recorded,
  // not run, and ReplayGraph runs them again with one launch, on the same pointers and sizes.
  // While capturing, a caller may enqueue ops only: no Allocate, no copies, no Synchronize.
  // Every buffer a graph uses must stay allocated while it may be replayed; the backend's own
  // scratch memory moves only when it grows, and then WorkspaceGeneration() changes (graphs
  // recorded before must be dropped). Backends without graphs keep these defaults.
  virtual bool SupportsGraphs() const { return false; }
  virtual Status BeginCapture() { return Unimplemented(caps().name + ": no graphs"); }
  // The id of the recorded graph (valid until DropGraphs).
  virtual StatusOr<int> EndCapture() { return Unimplemented(caps().name + ": no graphs"); }
  virtual Status ReplayGraph(int /*id*/) { return Unimplemented(caps().name + ": no graphs"); }
  virtual void DropGraphs() {}
  virtual uint64_t WorkspaceGeneration() const { return 0; }

 protected:
  friend class Buffer;
  virtual void Free(void* data) = 0;
};

// The CPU backend (host memory, synchronous stream, SIMD kernels of kernels/cpu_ops.h). One
// process-wide instance: it holds no state besides its capabilities and the lengths of its
// huge-page buffers (SetCpuHugePages).
Backend& CpuBackend();

// engine.huge_pages: whether the CPU backend keeps its buffers of 2 MiB or more (the KV cache,
// the workspace, repacked weights) in transparent huge pages, and copies into them the matmul
// weights it would otherwise read in place from a model file's mapping (kernels/cpu/
// huge_pages.h says why). On by default; it takes effect only where the kernel's THP mode is
// "always" or "madvise". Set it before the weights are placed and buffers allocated.
void SetCpuHugePages(bool on);
// Whether the CPU backend uses huge pages: SetCpuHugePages' choice and the kernel's THP mode.
bool CpuHugePages();

}  // namespace llm::kernels
