#pragma once
// The unfused MoE layer baseline and the FP8 tensor-core ceiling (issue 11 item 5), one GPU, P = 1 (one
// rank holds all E experts, no communication): what a user assembles from libraries. Library
// xstage_moe_unfused (bench/moe/CMakeLists.txt). The expert half (weights, GEMMs, SwiGLU + requantisation) lives in
// detail::GemmEngine / detail::ExpertStage below, shared with the expert-parallel version UnfusedEpMoe
// (unfused_ep.hpp). Tested by tests/moe_gpu/test_unfused_gpu.cpp (14 passing on an H200 in s62, results/gpu-tests).
//
// UnfusedMoe::run enqueues, on one stream, no host synchronisation:
//   1. permute: routed rows (token t, slot j) of the FP8 activations x [T][H] and their 1x128 scales
//      x_scale [T][H/128] gathered into expert-contiguous rows (expert order, then (t, j) order), each
//      expert's block padded to a multiple of kRowAlign = 4 rows (zero rows; see below why);
//   [W4A8 only] int4 -> e4m3 conversion of all expert weights (every call, as a user without an int4
//               GEMM would do; exact: every integer in [-8, 7] is an e4m3 value);
//   2. per expert with rows, one cublasLtMatmul (Linear-1): Y1_e [rows_e][2I] (bf16) = X_e W1_e^T,
//      W1_e [2I][H] (rows 0..I-1 gate, I..2I-1 up);
//   3. SwiGLU + FP8 requantisation: h = silu(gate) * up in fp32 from the bf16 Y1, per row and per 128
//      columns amax = max(max|h|, 1e-4), code = e4m3 satfinite(h * (448/amax)), scale = amax/448
//      (xstage/moe/quant.hpp's convention);
//   4. per expert one cublasLtMatmul (Linear-2): Y2_e [rows_e][H] (bf16) = Hq_e W2_e^T, W2_e [H][I];
//   5. un-permute + top-k weighted sum: out[t][:] = sum_j weight[t][j] * float(Y2(t, j)) in fp32, slot
//      order, no contraction (the reference's order), fp32 output [T][H].
//
// cuBLASLt facts this relies on (cuBLAS 13.1.0.3 of the CUDA 13.0 toolkit; docs/MOE.md has the header
// evidence; NOT verified on a GPU):
//   - FP8 needs the "TN" format on Hopper: A transposed, B not, column major; compute 32F, scale 32F.
//     Row-major D[M][N] = X[M][K] W[N][K]^T is computed as column-major D^T (N x M) = op(A) op(B) with
//     A = W (K x N, ld K, transa = T) and B = X (K x M, ld K, transb = N), D ld N. So the weights are
//     cuBLAS's A and the activations its B (as torch._scaled_mm does after its operand swap).
//   - Scale modes (CUBLASLT_MATMUL_DESC_A_SCALE_MODE / _B_SCALE_MODE, int32):
//       B (activations): CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, one fp32 per 128 elements along K,
//         stored "outer-dim-major": scale(m, kb) at kb * M + m, i.e. [K/128][M] with the M rows
//         contiguous (torch: shape (M, K/128), strides (1, M); NVIDIA's CUDALibrarySamples size it
//         ceil(K/128) * M).
//       A (FP8 weights): CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, one fp32 per 128x128 block,
//         K-blocks contiguous with the row pitch rounded up to 4 (16 bytes): scale(nb, kb) at
//         nb * round_up(K/128, 4) + kb (torch: "near-inner-dim-major (with 16-byte aligned strides)";
//         CUDALibrarySamples: round_up(ceil(K/128), 4) * ceil(N/128) floats). set_weights repacks the
//         user's unpadded [N/128][K/128] scales into this pitch.
//       A (W4A8 weights, converted to e4m3): VEC128_32F as well, [K/128][N] (the per-(row, 128-group)
//         int4 scales ARE 1x128 weight block scales; transposed once in set_weights). Whether cuBLASLt
//         takes VEC128 on A together with VEC128 on B is not documented in the header; torch._scaled_mm
//         lists the pair (BlockWise1x128, BlockWise1x128). The constructor PROBES it (heuristic plus one
//         small matmul); if refused, W4A8 falls back to Int4Path::kRequant128x128: every call
//         dequantises q * scale and requantises each 128x128 block to e4m3 with one fp32 scale (DeepGEMM
//         convention), then runs the W8A8 GEMMs. That fallback is NOT exact (one more e4m3 rounding of
//         the weights); int4_path() says which path runs.
//   - D is bf16 (FP8 D is not supported with VEC128/BLK128x128 scales, cuBLAS docs note 8).
//   - VEC128 scales of a GEMM with M rows are laid out with pitch M; a row count that is not a
//     multiple of 4 would leave the K-block columns 16-byte misaligned (a user report: "cuBLAS wants the
//     activation scales token-major with the token count a multiple of 4"). Hence every expert's block
//     is padded to kRowAlign = 4 rows (zero codes, unit scales, outputs ignored): at most 3 wasted rows
//     per expert. The padded layout is exactly xstage::moe::DispatchPlan's receive layout at P = 1 with
//     b_m = 4, which set_routing uses.
//   - cuBLASLt 13.1 has no grouped matmul (cublasLt.h has no CUBLASLT_BATCH_MODE_GROUPED; later cuBLAS
//     documents an experimental grouped mode accepting VEC128/BLK128x128 on sm_90), so run() issues
//     ONE cublasLtMatmul PER EXPERT with rows and skips empty experts. cublasLtMatmulAlgoGetHeuristic is
//     called once per distinct (GEMM, M) and cached.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace xstage::moe_bench {

enum class WeightFormat { kFp8, kInt4 };
const char* to_string(WeightFormat f);

struct UnfusedShape {
  int hidden = 0;   // H, multiple of 128
  int inter = 0;    // I, multiple of 128
  int experts = 0;  // E >= 1 (all on this GPU)
  int topk = 0;     // 1 <= k <= E
  int tokens = 0;   // T >= 1
};

// "" when the shape is valid, else the message the constructors throw (naming the value).
std::string check_unfused_shape(const UnfusedShape& s);

inline constexpr int kRowAlign = 4;  // rows of each expert block (and of the ceiling's M) are padded to this

// How W4A8 weights reach the tensor cores (see the header comment).
enum class Int4Path {
  kNone,              // FP8 weights
  kVec128Weights,     // exact: int4 -> e4m3 codes, the group scales as VEC128 scales of A
  kRequant128x128,    // fallback: q * scale requantised to e4m3 per 128x128 block (not exact)
};
const char* to_string(Int4Path p);

struct UnfusedOptions {
  bool force_int4_requant = false;  // W4A8: take the 128x128 requantisation path even if VEC128 on A works
};

namespace detail {
class LtFp8Gemm;  // one cuBLASLt FP8 block-scaled GEMM shape with its per-M algorithm cache (unfused.cpp)
struct DeviceBuffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n);  // cudaMalloc (n may be 0); RuntimeError naming the size
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr, o.bytes = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  // At least n bytes: reallocates (contents lost) when smaller. Not stream-ordered: no kernel may use it.
  void reserve(std::size_t n);
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};
struct LtHandle;  // owns a cublasLtHandle_t

// The expert half of the unfused layer, shared by UnfusedMoe (P = 1) and UnfusedEpMoe (unfused_ep.hpp).
//
// GemmEngine: the cuBLASLt handle and workspace, the Linear-1 GEMM (N = 2I, K = H) and the Linear-2 GEMM
// (N = H, K = I) with their per-M algorithm caches, and the W4A8 path (probed once, see the header comment).
// One engine serves any number of ExpertStages run one after another on one stream (the scale pointers are
// set on the descriptor per call, host side; the workspace is used by one GEMM at a time).
class GemmEngine {
 public:
  // hidden, inter: multiples of 128 (checked by the callers' shape checks). W4A8: probes the exact
  // VEC128-weights path unless opt.force_int4_requant (synchronises the device once).
  GemmEngine(int hidden, int inter, WeightFormat format, UnfusedOptions opt);
  ~GemmEngine();
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;

  int hidden() const { return hidden_; }
  int inter() const { return inter_; }
  WeightFormat format() const { return format_; }
  Int4Path int4_path() const { return int4_path_; }
  const std::string& int4_note() const { return int4_note_; }
  // Floats per expert of W1's / W2's scales in cuBLASLt's A layout of the path taken.
  std::size_t w1_scale_stride() const;
  std::size_t w2_scale_stride() const;

  // Row-major D[m][N] bf16 = X[m][K] (e4m3, VEC128 scales) * W[N][K]^T (e4m3, scales in the A layout).
  void linear1(int m, const void* w, const float* w_scale, const void* x, const float* x_scale, void* d,
               cudaStream_t stream);
  void linear2(int m, const void* w, const float* w_scale, const void* x, const float* x_scale, void* d,
               cudaStream_t stream);

 private:
  void make_gemms(bool vec128_weights);
  void probe_int4_vec128();

  int hidden_, inter_;
  WeightFormat format_;
  Int4Path int4_path_ = Int4Path::kNone;
  std::string int4_note_;
  std::unique_ptr<LtHandle> lt_;
  std::unique_ptr<LtFp8Gemm> gemm1_, gemm2_;
  DeviceBuffer workspace_;
};

// ExpertStage: `experts` experts of one rank on this GPU and the expert-contiguous rows routed to them.
// Holds the weights (user pointers, kept; the scales repacked into cuBLASLt's A layout; W4A8: the e4m3
// copies), the rows' tables (expert e owns padded rows [offsets[e], offsets[e+1]), counts[e] of them
// routed, each block padded to kRowAlign) and the buffers xp/xps (Linear-1 input, filled by the caller
// with launch_permute), y1, hq/hqs, y2. run() computes y2 from xp/xps.
class ExpertStage {
 public:
  // who: the prefix of error messages ("UnfusedMoe", "UnfusedEpMoe rank 3").
  ExpertStage(GemmEngine& engine, int experts, std::string who);
  ~ExpertStage();
  ExpertStage(const ExpertStage&) = delete;
  ExpertStage& operator=(const ExpertStage&) = delete;

  // Layouts as UnfusedMoe::set_weights with E = experts; synchronises the device.
  void set_weights(const std::uint8_t* w1, const float* w1_scale, const std::uint8_t* w2, const float* w2_scale);
  bool has_weights() const { return have_weights_; }
  // Buffers for at least `rows` padded rows (grow only). Synchronous: no run may be in flight.
  void reserve(int rows);
  // Routed rows per expert (experts entries): offsets, row -> expert table, reserve; uploads the tables
  // (synchronises the device).
  void set_rows(const std::vector<int>& counts);

  int experts() const { return experts_; }
  int rows() const { return rows_; }  // padded rows in use
  const std::vector<int>& counts() const { return counts_; }
  const std::vector<int>& offsets() const { return offsets_; }  // experts + 1 entries
  const int* row_expert() const { return row_expert_.as<const int>(); }
  const int* expert_off() const { return expert_off_.as<const int>(); }
  std::uint8_t* xp() const { return xp_.as<std::uint8_t>(); }
  float* xps() const { return xps_.as<float>(); }
  const std::uint16_t* y1() const { return y1_.as<const std::uint16_t>(); }
  const std::uint8_t* hq() const { return hq_.as<const std::uint8_t>(); }
  const std::uint16_t* y2() const { return y2_.as<const std::uint16_t>(); }

  // Enqueues: [W4A8] the int4 -> e4m3 conversion of the experts' weights (every call); per expert with rows
  // the Linear-1 GEMM; SwiGLU + FP8 1x128 requantisation; per expert with rows the Linear-2 GEMM.
  void run(cudaStream_t stream);
  // Fills xp, xps, y1, hq, hqs, y2 with 0xFF bytes (e4m3 / fp32 / bf16 NaN), stream-ordered (tests).
  void poison(cudaStream_t stream);

 private:
  void convert_int4_weights(cudaStream_t stream);

  GemmEngine& eng_;
  int experts_;
  std::string who_;
  const std::uint8_t* w1_user_ = nullptr;
  const std::uint8_t* w2_user_ = nullptr;
  const float* w1s_user_ = nullptr;
  const float* w2s_user_ = nullptr;
  DeviceBuffer w1q_, w2q_;  // int4: e4m3 codes of the converted weights
  DeviceBuffer w1s_, w2s_;  // scales in cuBLASLt's A layout
  DeviceBuffer xp_, xps_, y1_, hq_, hqs_, y2_;
  DeviceBuffer row_expert_, expert_off_;
  std::vector<int> counts_, offsets_;
  int rows_ = 0, capacity_ = 0;
  bool have_weights_ = false;
};
}  // namespace detail

class UnfusedMoe {
 public:
  // UsageError (a std::invalid_argument) for a bad shape, before any CUDA call; RuntimeError for CUDA /
  // cuBLAS failures. Allocates every workspace for the worst routing (T*k routed rows + 3 padding rows
  // per expert). W4A8: probes the exact VEC128-weights path (synchronises the device once).
  UnfusedMoe(const UnfusedShape& shape, WeightFormat format, UnfusedOptions opt = {});
  ~UnfusedMoe();
  UnfusedMoe(const UnfusedMoe&) = delete;
  UnfusedMoe& operator=(const UnfusedMoe&) = delete;

  // Device pointers, kept (not copied) and read by every run(): they must stay valid.
  //   kFp8 : w1 [E][2I][H] e4m3 codes, w1_scale [E][2I/128][H/128]; w2 [E][H][I], w2_scale [E][H/128][I/128]
  //   kInt4: w1 [E][2I][H/2] bytes (two int4 per byte, even k in the low nibble), w1_scale [E][2I][H/128];
  //          w2 [E][H][I/2], w2_scale [E][H][I/128]
  // Repacks the scales into cuBLASLt's layouts (own buffers); synchronises the device (not for timing).
  void set_weights(const std::uint8_t* w1, const float* w1_scale, const std::uint8_t* w2, const float* w2_scale);

  // Host top-k indices [T][k] (global experts), validated (xstage::moe::validate_topk: UsageError naming
  // token, slot and value). Builds the permutation on the HOST (xstage::moe::DispatchPlan, P = 1, b_m = 4)
  // and uploads it; a user would compute the offsets on the device, which this baseline leaves out of
  // the timed region on purpose: call once per routing, outside timing. Synchronises the device.
  void set_routing(const std::int32_t* topk_index_host);

  // x [T][H] e4m3 codes (16-byte aligned), x_scale [T][H/128], topk_weight [T][k], out [T][H] fp32
  // (16-byte aligned): all device pointers. Stream-ordered, no host synchronisation.
  void run(const std::uint8_t* x, const float* x_scale, const float* topk_weight, float* out, cudaStream_t stream);

  // Useful FLOPs of one call: xstage::moe::moe_layer_flops (padding rows not counted).
  double flops() const;

  const UnfusedShape& shape() const { return shape_; }
  WeightFormat format() const { return format_; }
  Int4Path int4_path() const { return engine_->int4_path(); }
  const std::string& int4_path_note() const { return engine_->int4_note(); }  // why the path was chosen

  // Introspection for tests (valid after set_routing): padded rows in use, per-expert routed rows and
  // padded row offsets (E + 1 entries), the padded row of (token, slot), and the device intermediates
  // of the last run: Linear-1 output (bf16 bits [rows][2I]), the requantised h (codes [rows][I]).
  int padded_rows() const { return stage_->rows(); }
  const std::vector<int>& expert_rows() const { return stage_->counts(); }
  const std::vector<int>& expert_offsets() const { return stage_->offsets(); }
  int padded_row(int token, int slot) const { return slot_row_host_.at(std::size_t(token) * shape_.topk + slot); }
  const std::uint16_t* linear1_output() const { return stage_->y1(); }
  const std::uint8_t* hidden_codes() const { return stage_->hq(); }
  // Fills those intermediates (and the permuted rows, their scales, the Linear-2 output) with 0xFF bytes,
  // stream-ordered: a test that reads them after a run then sees only what that run wrote.
  void poison_intermediates(cudaStream_t stream) { stage_->poison(stream); }

 private:
  UnfusedShape shape_;
  WeightFormat format_;
  std::unique_ptr<detail::GemmEngine> engine_;
  std::unique_ptr<detail::ExpertStage> stage_;  // all E experts, sized for the worst routing at construction
  // Routing tables (device): the token of each padded row (-1: padding), the padded row of each (t, j).
  detail::DeviceBuffer row_src_, slot_row_;
  std::vector<int> slot_row_host_;
  bool have_routing_ = false;
};

// The tensor-core ceiling: the layer's FLOPs without routing. Two cuBLASLt FP8 block-scaled GEMMs of
// M = T*k rows (rounded up to kRowAlign): [M x 2I x H] and [M x H x I] (D = X W^T, weights 128x128 scales,
// activations 1x128, bf16 out), on synthetic data written once by the constructor.
class CeilingGemm {
 public:
  explicit CeilingGemm(const UnfusedShape& shape);
  ~CeilingGemm();
  CeilingGemm(const CeilingGemm&) = delete;
  CeilingGemm& operator=(const CeilingGemm&) = delete;

  void run(cudaStream_t stream);
  // xstage::moe::moe_layer_flops of the shape (the <= 3 padding rows of M not counted).
  double flops() const;

  int rows() const { return m_; }
  const std::uint16_t* output1() const { return d1_.as<const std::uint16_t>(); }  // bf16 bits [M][2I]
  const std::uint16_t* output2() const { return d2_.as<const std::uint16_t>(); }  // bf16 bits [M][H]
  // The synthetic operands (e4m3 codes, K contiguous), so a test can check the outputs: activations [M][H] and
  // [M][I], weights [2I][H] and [H][I]; every block scale is the constant below.
  const std::uint8_t* activations1() const { return x1_.as<const std::uint8_t>(); }
  const std::uint8_t* weights1() const { return w1_.as<const std::uint8_t>(); }
  const std::uint8_t* activations2() const { return x2_.as<const std::uint8_t>(); }
  const std::uint8_t* weights2() const { return w2_.as<const std::uint8_t>(); }
  static constexpr float kWeightScale = 1.0f / 64, kActivationScale = 1.0f / 32;

 private:
  UnfusedShape shape_;
  int m_ = 0;
  std::unique_ptr<detail::LtHandle> lt_;
  std::unique_ptr<detail::LtFp8Gemm> gemm1_, gemm2_;
  detail::DeviceBuffer workspace_, w1_, w1s_, x1_, x1s_, d1_, w2_, w2s_, x2_, x2s_, d2_;
};

// The memory floor beside the tensor-core ceiling (xstage/moe/layer_bound.hpp): the time the GPU takes to read a
// layer's unavoidable bytes once and write its output once, with nothing else to do. One persistent kernel reads
// every byte of the given device ranges (adjacent ranges merged; chunks spread over every SM, 16-byte vector loads)
// and stores write_bytes of fp32 ones at `write`. The reads are summed byte by byte into a device checksum (so no
// load is elided, and a test can check that every byte was read once). A floor must be as fast as the GPU allows:
// the constructor times each load form of the kernel (4 or 8 loads in flight per thread, evict-first or
// non-coherent, or bulk copies into shared memory; twice each, in both orders) on these very ranges and keeps the
// fastest.
struct DeviceRange {
  const void* p = nullptr;
  std::size_t bytes = 0;
};
class ByteStream {
 public:
  // UsageError naming the value: a null range with bytes, a write range not 16-byte aligned or not a multiple
  // of 16 bytes, or nothing to move.
  // force_variant >= 0: that load form, untimed (tests: every form's coverage); UsageError outside [0, variants()).
  ByteStream(const std::vector<DeviceRange>& reads, void* write, std::size_t write_bytes, int force_variant = -1);
  static int variants();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  void run(cudaStream_t stream);
  std::size_t bytes_read() const { return read_bytes_; }
  std::size_t bytes_written() const { return write_bytes_; }
  int ranges() const { return n_ranges_; }  // after merging adjacent ones
  int variant() const { return variant_; }  // the load form the constructor picked
  const char* variant_name() const;
  // Each load form's time per run while the constructor picked (the mean of its two timed runs; NaN when forced).
  double form_ms(int variant) const;
  static const char* form_name(int variant);
  // The byte sum of everything read since construction or the last reset (synchronises the stream).
  std::uint64_t checksum(cudaStream_t stream) const;
  void reset_checksum(cudaStream_t stream);

 private:
  std::size_t read_bytes_ = 0, write_bytes_ = 0, chunk_ = 0, read_chunks_ = 0;
  int n_ranges_ = 0, grid_ = 0, variant_ = 0;
  std::vector<double> form_ms_;
  void* write_ = nullptr;
  detail::DeviceBuffer ranges_, prefix_, checksum_;
};

}  // namespace xstage::moe_bench
