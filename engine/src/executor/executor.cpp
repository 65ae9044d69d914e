// The executor (castscope/executor.hpp): placement with the backend's facts, the fallback
// record, the device cache and the sweep.
#include "castscope/executor.hpp"

#include <atomic>
#include <mutex>

#include "backends/backend.hpp"
#include "rotation/rotation_backend.hpp"
#include "backends/device_api.hpp"

namespace castscope {

std::function<void(const std::string&)>& notice_handler();  // cast.cpp
namespace detail {
void note_gpu_context();  // placement.cpp
}

namespace exec {

void count_cpu_cast(int64_t n);  // placement.cpp

namespace {

// The CUDA backend: its device copies are gpu::DeviceTensor, its casts the device-resident ones
// of backends/device_api.hpp. Without CUDA every call throws and the facts say why.
class CudaBackend final : public DeviceBackend {
 public:
  const char* name() const override { return "cuda"; }
  DeviceFacts facts() override {
    DeviceFacts f;
    f.running = gpu_running();
    f.starting = gpu_starting();
    f.available = [](std::string* reason) { return gpu::available(reason); };
    return f;
  }
  CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& options) override {
    return cuda::cast(x, dtype, options);
  }
  DeviceHandle upload(const Tensor& x) override {
    return std::make_shared<gpu::DeviceTensor>(gpu::DeviceTensor::upload(x));
  }
  Stats cast_stats(const DeviceHandle& x, const DataType& dtype,
                   const CastOptions& options) override {
    const gpu::DeviceTensor& dx = *static_cast<const gpu::DeviceTensor*>(x.get());
    const gpu::DeviceCastResult r = gpu::cast(dx, dtype, options);
    return gpu::compute_stats(dx, r.values, r.counts.clipped);
  }
  Tensor rotate(const Tensor& x, const Rotation& r, float scale, int64_t outer, int64_t len,
                int64_t inner, bool inverse) override {
    return cuda::rotate_f32(x, r, scale, outer, len, inner, inverse);
  }
};

std::atomic<Executor*>& current_slot() {
  static std::atomic<Executor*> e{nullptr};
  return e;
}

}  // namespace

Tensor DeviceBackend::rotate(const Tensor&, const Rotation& r, float, int64_t, int64_t, int64_t,
                             bool) {
  throw Error(std::string("rotation ") + r.str() + ": the " + name() +
              " backend has no device rotation");
}

std::shared_ptr<DeviceBackend> cuda_backend() {
  static const std::shared_ptr<DeviceBackend> b = std::make_shared<CudaBackend>();
  return b;
}

const gpu::DeviceTensor& cuda_tensor(const DeviceHandle& h) {
  if (!h) throw Error("no device copy");
  return *static_cast<const gpu::DeviceTensor*>(h.get());
}

DeviceHandle cuda_handle(gpu::DeviceTensor t) {
  return std::make_shared<gpu::DeviceTensor>(std::move(t));
}

PlacedTensor cuda_placed(const DeviceHandle& h) {
  return PlacedTensor(cuda_tensor(h));
}

void notice_once(const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] { notice_handler()(message); });
}

// ---------------------------------------------------------------------------------------------

DeviceCache::DeviceCache(std::shared_ptr<DeviceBackend> backend) : backend_(std::move(backend)) {}

DeviceHandle DeviceCache::get(const Tensor& x) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!device_ || !same_storage(host_, x)) {
    device_.reset();  // the old copy's memory goes back before the new one is taken
    host_ = Tensor();
    device_ = backend_->upload(x);
    host_ = x;
    ++uploads_;
  }
  return device_;
}

void DeviceCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  device_.reset();
  host_ = Tensor();
}

uint64_t DeviceCache::uploads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return uploads_;
}

// ---------------------------------------------------------------------------------------------

Executor::Executor(std::shared_ptr<DeviceBackend> backend) : backend_(std::move(backend)) {}

Placement Executor::place(Work kind, Device requested, int64_t n, const DataType* dtype,
                          OnFailure policy) {
  if (requested == Device::CPU) return decide(kind, requested, n, dtype, {}, policy);
  const DeviceFacts f = backend_->facts();
  // A cast that Auto leaves on the CPU for its size counts towards the background start,
  // whatever its family (placement.cpp's policy, unchanged).
  if (kind == Work::Cast && requested == Device::Auto && dtype &&
      n < auto_gpu_min_elements(*dtype, f.running))
    count_cpu_cast(n);
  Placement p = decide(kind, requested, n, dtype, f, policy);
  // A cast asked of a GPU that is not there says so once: its result says "cpu" where the
  // user may have expected "cuda".
  if (kind == Work::Cast && p.no_gpu && p.device == Device::CPU)
    notice_once(p.reason + "; using the CPU backend");
  return p;
}

void Executor::record_fallback(Work kind, const std::string& failure, std::string* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fallbacks_.push_back(failure);
  }
  if (out) *out = failure;
  notice_once(std::string("GPU ") + to_string(kind) + " failed (" + failure +
              "); using the CPU backend");
}

std::vector<std::string> Executor::fallbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fallbacks_;
}

void Executor::note_device_ran() {
  if (backend_ == cuda_backend()) detail::note_gpu_context();
}

Executor& current() {
  static Executor process(cuda_backend());
  Executor* e = current_slot().load();
  return e ? *e : process;
}

Override::Override(Executor& e) : before_(current_slot().exchange(&e)) {}

Override::~Override() {
  current_slot().store(before_);
}

// ---------------------------------------------------------------------------------------------

Sweep::Sweep(Executor& ex, Device requested, bool device_possible, JobControl* job)
    : ex_(ex),
      placement_(ex.place(Work::Sweep, device_possible ? requested : Device::CPU, 0, nullptr)),
      job_(job),
      cache_(ex.backend_ptr()) {}

std::string Sweep::backend() const {
  return on_device() ? ex_.backend().name() : "cpu";
}

Stats Sweep::cast_stats(const Tensor& x, const DataType& dtype, const CastOptions& o) {
  return cast_stats([&x]() -> const Tensor& { return x; }, dtype, o);
}

Stats Sweep::cast_stats(const std::function<const Tensor&()>& host_x, const DataType& dtype,
                        const CastOptions& o) {
  if (job_) job_->check();
  // The host way is cast() as the caller asked for it: the same bits, or the same error for a
  // datatype that does not fit the tensor.
  auto host = [&] {
    const Tensor& x = host_x();
    const CastResult r = cast(x, dtype, o);
    return compute_stats(x, r.values, r.counts.clipped);
  };
  // ggml's block formats have no device kernels: the host casts them without a device attempt.
  if (!on_device() || !family_traits(dtype.family()).device_cast) return host();
  DeviceHandle dx = streamed_;
  if (!dx) {
    try {
      dx = cache_.get(host_x());
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      // Out of device memory, say: the rest of the sweep runs on the host.
      placement_ = {Work::Sweep, Device::CPU, std::string("the upload failed: ") + e.what(), false};
      ex_.record_fallback(Work::Sweep, placement_.reason, &fallback_);
      return host();
    }
  }
  return ex_.run<Stats>(
      placement_, OnFailure::FallBack, [&] { return ex_.backend().cast_stats(dx, dtype, o); }, host,
      &fallback_);
}

void Sweep::next_tensor() {
  streamed_.reset();
  cache_.clear();
}

}  // namespace exec
}  // namespace castscope
