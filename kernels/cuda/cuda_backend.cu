// The CUDA backend (kernels/cuda_backend.h): device memory, one stream, the kernels of
// kernels/cuda/*.cu and cuBLASLt. Ops only enqueue; the first error since the last Synchronize
// is kept and returned by it, which the model calls once per step.
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/index_math.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda_backend.h"

namespace llm::kernels {
namespace {

constexpr int kMinPartitionKeys = 64;                 // fewest keys of a split-K partition
constexpr int64_t kMaxAttentionWorkspace = 16 << 20;  // floats of split-K partials (64 MiB)
constexpr int kMaxHeadDim = 512;                      // attention's per-lane registers
constexpr int kMaxBlockSize = 256;

Status FromCuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

class CudaBackendImpl final : public Backend {
 public:
  explicit CudaBackendImpl(int device) : device_(device) {}
  ~CudaBackendImpl() override {
    DropGraphs();
    scratch_ = Buffer();
    attention_ws_ = Buffer();
    if (done_) cudaEventDestroy(done_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status Init() {
    LLM_RETURN_IF_ERROR(FromCuda(cudaSetDevice(device_), "cudaSetDevice"));
    cudaDeviceProp prop{};
    LLM_RETURN_IF_ERROR(FromCuda(cudaGetDeviceProperties(&prop, device_), "device properties"));
    if (prop.major < 8) {
      return FailedPrecondition("CUDA device " + std::to_string(device_) + " (" + prop.name +
                                ") has compute capability " + std::to_string(prop.major) + "." +
                                std::to_string(prop.minor) +
                                "; this build needs 8.0 or newer (A100, L4/L40, H100, ...)");
    }
    sm_count_ = prop.multiProcessorCount;
    LLM_RETURN_IF_ERROR(
        FromCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"));
    LLM_RETURN_IF_ERROR(gemm_.Init());
    LLM_RETURN_IF_ERROR(
        FromCuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "event"));
    caps_.name = "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
    caps_.weight_formats = {DType::kF32, DType::kF16, DType::kBF16};
    caps_.max_head_dim = kMaxHeadDim;
    caps_.max_block_size = kMaxBlockSize;
    caps_.memory_bytes = prop.totalGlobalMem;
    caps_.host_memory = false;
    return Status::Ok();
  }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  const BackendCaps& caps() const override { return caps_; }

  StatusOr<Buffer> Allocate(size_t bytes) override {
    if (bytes == 0) return Buffer();
    if (capturing_) return FailedPrecondition(caps_.name + ": Allocate while recording a graph");
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky: clear it
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      return ResourceExhausted(caps_.name + ": cannot allocate " + std::to_string(bytes >> 20) +
                               " MiB of device memory (" + std::to_string(free_bytes >> 20) +
                               " MiB free of " + std::to_string(total >> 20) + ")");
    }
    return Buffer(this, p, bytes);
  }
  void Zero(void* dst, size_t bytes) override {
    Check(cudaMemsetAsync(dst, 0, bytes, stream_), "Zero");
  }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (capturing_) return Fail(FailedPrecondition(caps_.name + ": CopyToDevice while recording"));
    // From pageable host memory the call returns once `src` is staged, so the caller may reuse
    // it at once.
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "CopyToDevice");
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (capturing_) return Fail(FailedPrecondition(caps_.name + ": CopyToHost while recording"));
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "CopyToHost");
    WaitStream("CopyToHost");
  }
  Status Synchronize() override {
    if (capturing_) return FailedPrecondition(caps_.name + ": Synchronize while recording");
    WaitStream("Synchronize");
    // Reported once: an op refused (a weight format, a scratch that could not grow) leaves the
    // device usable, so the next step starts clean. A CUDA error that breaks the context comes
    // back on its own, from the next WaitStream's event calls.
    std::lock_guard<std::mutex> lock(error_mu_);
    Status s = std::move(error_);
    error_ = Status::Ok();
    return s;
  }
  void set_wait_timeout_s(double s) { wait_timeout_s_ = s; }

  void Matmul(const float* x, int m, const Weight& w, const float* bias, float* y) override {
    if (m <= 0 || w.rows <= 0) return;
    const void* xin = x;
    if (w.format == DType::kF16 || w.format == DType::kBF16) {
      const int64_t count = static_cast<int64_t>(m) * w.cols;
      if (!GrowScratch(sizeof(uint16_t) * count)) return;
      cuda::LaunchConvert(stream_, x, count, w.format, scratch_.data());
      xin = scratch_.data();
    } else if (w.format != DType::kF32) {
      Fail(Unimplemented(caps_.name + " Matmul: weights in " + DTypeName(w.format)));
      return;
    }
    Status s = gemm_.Run(stream_, xin, w.data, w.format, m, w.rows, w.cols, y);
    if (!s.ok()) return Fail(std::move(s));
    if (bias != nullptr) cuda::LaunchAddBias(stream_, y, bias, m, w.rows);
    CheckLaunch("Matmul");
  }
  void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps,
               float* out) override {
    cuda::LaunchRmsNorm(stream_, x, weight, rows, dim, eps, out);
    CheckLaunch("RmsNorm");
  }
  void AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int dim,
                  float eps, float* out) override {
    cuda::LaunchAddRmsNorm(stream_, residual, x, weight, rows, dim, eps, out);
    CheckLaunch("AddRmsNorm");
  }
  void Rope(float* x, const int32_t* positions, int tokens, int heads, const RopeLayout& layout,
            const float* inv_freq) override {
    cuda::LaunchRope(stream_, x, positions, tokens, heads, layout, inv_freq);
    CheckLaunch("Rope");
  }
  void SiluMul(const float* gate, const float* up, int64_t count, float* out) override {
    cuda::LaunchSiluMul(stream_, gate, up, count, out);
    CheckLaunch("SiluMul");
  }
  void GeluTanhMul(const float* gate, const float* up, int64_t count, float* out) override {
    cuda::LaunchGeluTanhMul(stream_, gate, up, count, out);
    CheckLaunch("GeluTanhMul");
  }
  void Scale(float* x, float s, int64_t count) override {
    cuda::LaunchScale(stream_, x, s, count);
    CheckLaunch("Scale");
  }
  void ScatterAddRows(const float* src, const int32_t* rows, const float* scale, int count,
                      int cols, float* dst) override {
    cuda::LaunchScatterAddRows(stream_, src, rows, scale, count, cols, dst);
    CheckLaunch("ScatterAddRows");
  }
  void Add(float* x, const float* y, int64_t count) override {
    cuda::LaunchAdd(stream_, x, y, count);
    CheckLaunch("Add");
  }
  void AddBias(float* x, const float* bias, int rows, int cols) override {
    cuda::LaunchAddBias(stream_, x, bias, rows, cols);
    CheckLaunch("AddBias");
  }
  void Embedding(const int32_t* ids, int tokens, const Weight& table, int first_id,
                 float* out) override {
    if (!caps_.SupportsWeightFormat(table.format)) {
      return Fail(Unimplemented(caps_.name + " Embedding: a table in " + DTypeName(table.format)));
    }
    cuda::LaunchEmbedding(stream_, ids, tokens, table.data, table.format, table.rows, table.cols,
                          first_id, out);
    CheckLaunch("Embedding");
  }
  void GatherRows(const float* src, const int32_t* rows, int count, int cols, float* dst) override {
    cuda::LaunchGatherRows(stream_, src, rows, count, cols, dst);
    CheckLaunch("GatherRows");
  }
  // The KV cache holds float32 (caps_.kv_cache_dtypes); a half cache is refused at allocation
  // (RankExecutor::AllocateCache), and here as well.
  void ReshapeAndCache(const float* k, const float* v, int tokens, int kv_heads, int head_dim,
                       const int32_t* slot_mapping, int block_size, void* k_cache, void* v_cache,
                       DType cache_dtype) override {
    if (cache_dtype != DType::kF32) {
      return Fail(
          Unimplemented(caps_.name + " ReshapeAndCache: a KV cache of " + DTypeName(cache_dtype)));
    }
    cuda::LaunchReshapeAndCache(stream_, k, v, tokens, kv_heads, head_dim, slot_mapping, block_size,
                                static_cast<float*>(k_cache), static_cast<float*>(v_cache));
    CheckLaunch("ReshapeAndCache");
  }
  void PagedAttention(const float* q, const void* k_cache, const void* v_cache,
                      const AttentionBatch& batch, const AttentionParams& params,
                      float* out) override {
    if (params.kv_dtype != DType::kF32) {
      return Fail(Unimplemented(caps_.name + " PagedAttention: a KV cache of " +
                                DTypeName(params.kv_dtype)));
    }
    const int max_context = batch.max_blocks_per_seq * params.block_size;
    const int partitions =
        cuda::ChoosePartitions(batch.num_tokens, params.q_heads, params.head_dim, max_context,
                               sm_count_, kMinPartitionKeys, kMaxAttentionWorkspace);
    const int64_t ws = cuda::AttentionWorkspaceFloats(batch.num_tokens, params.q_heads,
                                                      params.head_dim, partitions);
    if (ws > 0 && attention_ws_.bytes() < sizeof(float) * static_cast<size_t>(ws)) {
      if (capturing_) {
        return Fail(
            FailedPrecondition(caps_.name + ": attention scratch must grow while recording"));
      }
      ++workspace_generation_;
      attention_ws_ = Buffer();
      StatusOr<Buffer> b = Allocate(sizeof(float) * static_cast<size_t>(ws));
      if (!b.ok()) return Fail(b.status());
      attention_ws_ = std::move(*b);
    }
    cuda::LaunchPagedAttention(stream_, q, static_cast<const float*>(k_cache),
                               static_cast<const float*>(v_cache), batch, params, partitions,
                               kMinPartitionKeys, attention_ws_.as<float>(), out);
    CheckLaunch("PagedAttention");
  }

  bool SupportsGraphs() const override { return true; }
  Status BeginCapture() override {
    if (capturing_) return FailedPrecondition(caps_.name + ": already recording a graph");
    LLM_RETURN_IF_ERROR(Synchronize());
    // Thread-local mode: an unsafe call (cudaMalloc, a synchronous copy) from this thread
    // fails the capture instead of corrupting it; other threads are not affected.
    LLM_RETURN_IF_ERROR(FromCuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                 "BeginCapture"));
    capturing_ = true;
    capture_error_ = Status::Ok();
    return Status::Ok();
  }
  StatusOr<int> EndCapture() override {
    if (!capturing_) return FailedPrecondition(caps_.name + ": EndCapture without BeginCapture");
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    Status s = FromCuda(cudaStreamEndCapture(stream_, &graph), "EndCapture");
    if (s.ok()) s = capture_error_;
    cudaGraphExec_t exec = nullptr;
    if (s.ok()) s = FromCuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (graph) cudaGraphDestroy(graph);
    if (!s.ok()) {
      cudaGetLastError();  // a failed recording is not a broken device: clear it
      return s;
    }
    graphs_.push_back(exec);
    return static_cast<int>(graphs_.size()) - 1;
  }
  Status ReplayGraph(int id) override {
    if (id < 0 || id >= static_cast<int>(graphs_.size()) || graphs_[id] == nullptr) {
      return InvalidArgument(caps_.name + ": no graph " + std::to_string(id));
    }
    Check(cudaGraphLaunch(graphs_[id], stream_), "ReplayGraph");
    return Status::Ok();
  }
  void DropGraphs() override {
    if (!graphs_.empty()) cudaStreamSynchronize(stream_);  // none may still be running
    for (cudaGraphExec_t g : graphs_) {
      if (g) cudaGraphExecDestroy(g);
    }
    graphs_.clear();
  }
  uint64_t WorkspaceGeneration() const override { return workspace_generation_; }

 protected:
  void Free(void* data) override { cudaFree(data); }

 private:
  void Fail(Status s) {
    if (capturing_) {  // reported by EndCapture; the device is fine
      if (capture_error_.ok()) capture_error_ = std::move(s);
      return;
    }
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_.ok()) error_ = std::move(s);
  }
  void Check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) Fail(FromCuda(e, caps_.name + " " + what));
  }
  void CheckLaunch(const char* what) { Check(cudaGetLastError(), what); }
  // Waits for everything enqueued so far, bounded: a collective whose peer died never completes,
  // and cudaStreamSynchronize would wait forever (and spin a core). Yields for the first 2 ms
  // (a step's tail), then sleeps 50 us between polls; past the timeout the wait fails.
  void WaitStream(const char* what) {
    Check(cudaEventRecord(done_, stream_), what);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t e = cudaEventQuery(done_);
      if (e != cudaErrorNotReady) return Check(e, what);
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (wait_timeout_s_ > 0 && waited > wait_timeout_s_) {
        return Fail(Internal(caps_.name + " " + what + ": the GPU did not finish within " +
                             std::to_string(static_cast<int>(wait_timeout_s_)) +
                             " s (a collective waiting for a rank that stopped?)"));
      }
      if (waited < 2e-3) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  bool GrowScratch(size_t bytes) {
    if (scratch_.bytes() >= bytes) return true;
    if (capturing_) {  // freeing the old scratch is not allowed (nor safe) while recording
      Fail(FailedPrecondition(caps_.name + ": Matmul scratch must grow while recording"));
      return false;
    }
    ++workspace_generation_;
    scratch_ = Buffer();
    StatusOr<Buffer> b = Allocate(bytes);
    if (!b.ok()) {
      Fail(b.status());
      return false;
    }
    scratch_ = std::move(*b);
    return true;
  }

  const int device_;
  int sm_count_ = 1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;  // WaitStream's marker
  double wait_timeout_s_ = 0;   // 0: wait as long as it takes
  cuda::LtGemm gemm_;
  BackendCaps caps_;
  Buffer scratch_;       // the F16/BF16 copy of a Matmul's activations
  Buffer attention_ws_;  // split-K partials
  std::mutex error_mu_;
  Status error_;
  // Graphs: recorded executables by id, whether a recording is under way and its first error,
  // and the count of scratch reallocations (graphs recorded before one are stale).
  std::vector<cudaGraphExec_t> graphs_;
  bool capturing_ = false;
  Status capture_error_;
  uint64_t workspace_generation_ = 0;
};

std::mutex g_backend_mu;
std::unique_ptr<CudaBackendImpl> g_backend;  // one GPU per process

}  // namespace

bool CudaCompiled() {
  return true;
}

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error for the caller
    return 0;
  }
  return n;
}

StatusOr<Backend*> CudaBackend(int device) {
  std::lock_guard<std::mutex> lock(g_backend_mu);
  if (g_backend) {
    if (g_backend->device() == device) return static_cast<Backend*>(g_backend.get());
    return FailedPrecondition("this process drives CUDA device " +
                              std::to_string(g_backend->device()) + " already; device " +
                              std::to_string(device) + " needs a process of its own");
  }
  const int count = CudaDeviceCount();
  if (device < 0 || device >= count) {
    return Unavailable("CUDA device " + std::to_string(device) + " does not exist (" +
                       (count == 0 ? std::string("no CUDA device or driver on this host")
                                   : std::to_string(count) + " device(s) on this host") +
                       ")");
  }
  auto backend = std::make_unique<CudaBackendImpl>(device);
  LLM_RETURN_IF_ERROR(backend->Init());
  g_backend = std::move(backend);
  return static_cast<Backend*>(g_backend.get());
}

StatusOr<DeviceMemoryInfo> CudaMemoryInfo(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackendImpl*>(&backend);
  if (cuda == nullptr) {
    return FailedPrecondition("backend '" + backend.caps().name + "' is not a CUDA backend");
  }
  LLM_RETURN_IF_ERROR(backend.Synchronize());
  DeviceMemoryInfo info;
  LLM_RETURN_IF_ERROR(
      FromCuda(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo"));
  return info;
}

void SetCudaWaitTimeout(Backend& backend, double seconds) {
  if (auto* cuda = dynamic_cast<CudaBackendImpl*>(&backend)) cuda->set_wait_timeout_s(seconds);
}

void* CudaStreamOf(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackendImpl*>(&backend);
  return cuda ? static_cast<void*>(cuda->stream()) : nullptr;
}

}  // namespace llm::kernels
