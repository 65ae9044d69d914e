// The CUDA entry points of a build without CUDA: every one reports why instead of running, so the
// engine, the CLI and the tests link and behave the same on machines without nvcc.
#include "backends/backend.hpp"
#include "backends/device_api.hpp"
#include "castscope/matmul.hpp"
#include "backends/cuda/fast_quantizer_check.hpp"
#include "modelmap/linear_products.hpp"

namespace castscope {
namespace {
constexpr const char* kNoCuda = "built without CUDA";
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": this build has no CUDA backend (" + kNoCuda + ")");
}
}  // namespace

namespace cuda {

bool available(std::string* reason, std::string* device_name) {
  if (reason) *reason = "this build has no CUDA backend (configured with CASTSCOPE_CUDA=OFF)";
  if (device_name) device_name->clear();
  return false;
}

bool start_context(std::string* reason) {
  return available(reason, nullptr);
}

CastResult cast(const Tensor&, const DataType&, const CastOptions&) {
  no_cuda("GPU cast");
}

}  // namespace cuda

bool gemm_available(std::string* reason) {
  if (reason) *reason = kNoCuda;
  return false;
}

int gemm_compute_capability() {
  return 0;
}

GemmResult run_gemm(GemmKind, const GemmOptions&, JobControl*) {
  no_cuda("GEMM");
}

namespace detail {
LinearProducts linear_products_cuda(const Tensor&, const Tensor&, const LinearErrorOptions&,
                                    JobControl*, LinearReuse::State*) {
  no_cuda("linear layer on the GPU");
}
}  // namespace detail

namespace gpu {

bool available(std::string* reason) {
  return cuda::available(reason, nullptr);
}

DeviceTensor DeviceTensor::empty(DType, Shape, bool) {
  no_cuda("device tensor");
}
DeviceTensor DeviceTensor::upload(const Tensor&) {
  no_cuda("device tensor");
}
DeviceTensor DeviceTensor::borrow(DType, Shape, std::shared_ptr<void>, void*) {
  no_cuda("device tensor");
}
Tensor DeviceTensor::download() const {
  no_cuda("device tensor");
}
Tensor DeviceTensor::download_block(int64_t, int64_t, int64_t, int64_t) const {
  no_cuda("device tensor");
}
TransferCounters transfer_counters() {
  return {};
}
void synchronize() {}
DeviceTensor DeviceTensor::reshaped(Shape) const {
  no_cuda("device tensor");
}
CastResult DeviceCastResult::download() const {
  no_cuda("device cast result");
}

DeviceCastResult cast(const DeviceTensor&, const DataType&, const CastOptions&, bool) {
  no_cuda("GPU cast");
}
Stats compute_stats(const DeviceTensor&, const DeviceTensor&, int64_t) {
  no_cuda("GPU statistics");
}
Histogram histogram(const DeviceTensor&, double, double, int, bool) {
  no_cuda("GPU histogram");
}
Histogram error_histogram(const DeviceTensor&, const DeviceTensor&, double, double, int) {
  no_cuda("GPU histogram");
}
ExponentHistogram exponent_histogram(const DeviceTensor&) {
  no_cuda("GPU histogram");
}
double absmax(const DeviceTensor&) {
  no_cuda("GPU absmax");
}
std::vector<int64_t> cell_counts(const DeviceTensor&, const DeviceTensor&, const DeviceTensor*,
                                 int64_t, int64_t, int64_t, int64_t, int64_t) {
  no_cuda("GPU mask image");
}
TileMap tile_map(const DeviceTensor&, const DeviceTensor&, const DeviceCastResult&) {
  no_cuda("GPU tile map");
}
DeviceTileMap tile_map_device(const DeviceTensor&, const DeviceTensor&, const DeviceCastResult&) {
  no_cuda("GPU tile map");
}
TileMap DeviceTileMap::download() const {
  no_cuda("GPU tile map");
}
TileMap DeviceTileMap::window(int64_t, int64_t, int64_t, int64_t) const {
  no_cuda("GPU tile map");
}

int run_benchmark(const BenchOptions& opt, std::FILE* out) {
  check_bench_options(opt);
  std::fprintf(out, "castscope bench: no usable GPU (%s); nothing to measure.\n", kNoCuda);
  return 0;
}

namespace detail {
bool fast_quantizer_applies(const scalar::Format&) {
  return false;
}
int static_grid(const scalar::Format&) {
  return 0;
}
std::string cast_kernel(const Tensor&, const DataType&, const CastOptions&) {
  no_cuda("GPU cast");
}
}  // namespace detail

}  // namespace gpu
}  // namespace castscope
