// The executor: the one place that decides where engine work runs (CPU or GPU), what happens
// when the GPU fails, which tensors stay in device memory between calls, and how long work
// reports progress and honours cancellation (docs/development.md, "Executor").
//
// Callers (cast, rotation, the model map sweep, the linear-layer error, the app's views) ask it
// for a placement and hand it a device and a host way of doing the work; it runs one, and when
// the device way fails with an Error the host way runs instead, the reason recorded and shown.
// Both ways give the same bits (the kernels share scalar code with the CPU), so a fallback
// changes only where the work ran and how long it took.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"
#include "castscope/placed.hpp"
#include "castscope/rotation.hpp"

namespace castscope::exec {

// What is asked for. The kinds differ in how Device::Auto resolves: a single cast weighs its
// size against the GPU's start-up cost; the views wait for a GPU that is still starting; the
// others take a usable GPU whenever there is one.
enum class Work { Cast, Rotation, Views, Linear, Sweep };
const char* to_string(Work w);

// What a device failure (no usable GPU, a CUDA error, out of device memory) leads to.
enum class OnFailure {
  FallBack,  // the host runs it; the reason is recorded and announced once
  Throw,     // the caller gets the Error (an explicit --device cuda that must run there)
};

// What placement depends on; the backend reports them, tests set them.
struct DeviceFacts {
  bool running = false;   // a GPU context is up (no start-up cost left to pay)
  bool starting = false;  // a background start is under way
  // Whether a usable GPU is there, and why not when not. Asked only when the answer matters:
  // the first ask in a process loads the driver, which a CPU-only command must not pay for.
  std::function<bool(std::string* reason)> available;
};

struct Placement {
  Work kind = Work::Cast;
  Device device = Device::CPU;  // CPU or CUDA, never Auto
  std::string reason;           // why there, in words
  bool no_gpu = false;          // a GPU was wanted and none is usable (the reason says why)
};

// Where work of `kind` over n elements of dtype (null: no datatype, e.g. a rotation) runs when
// `requested` was asked for. Pure: the start-up policy (auto_gpu_min_elements) and the facts
// decide. A device placement with no usable GPU becomes the CPU under FallBack, with the reason;
// under Throw it stays CUDA and the device attempt reports the failure.
Placement decide(Work kind, Device requested, int64_t n, const DataType* dtype,
                 const DeviceFacts& facts, OnFailure policy = OnFailure::FallBack);

// A tensor's copy in device memory; what it holds is the backend's business (the CUDA backend
// keeps a gpu::DeviceTensor).
using DeviceHandle = std::shared_ptr<void>;

// The device side the executor drives: CUDA in a CUDA build with a GPU, none otherwise, and a
// host-memory stand-in in the tests.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual const char* name() const = 0;  // the result's backend string, e.g. "cuda"
  virtual DeviceFacts facts() = 0;       // cheap: availability is probed lazily
  // cast() on the device for a host tensor: the same contract and bits as the CPU. Throws
  // Error when the device cannot do it.
  virtual CastResult cast(const Tensor& x, const DataType& dtype, const CastOptions& options) = 0;
  // A float32 copy of x in device memory. Throws Error (e.g. out of memory).
  virtual DeviceHandle upload(const Tensor& x_f32) = 0;
  // Statistics of a virtual cast of the device copy, as compute_stats(x, cast(x).values,
  // clipped) gives them. Throws Error when the device cannot do it.
  virtual Stats cast_stats(const DeviceHandle& x, const DataType& dtype,
                           const CastOptions& options) = 0;
  // A block rotation (rotation.hpp) of a float32 host tensor viewed as [outer, len, inner], with
  // the CPU's bits. Throws Error when the device cannot do it (the default: no device rotation).
  virtual Tensor rotate(const Tensor& x_f32, const Rotation& r, float scale, int64_t outer,
                        int64_t len, int64_t inner, bool inverse);
};

// The CUDA backend (its facts say why not where there is no GPU or no CUDA build).
std::shared_ptr<DeviceBackend> cuda_backend();
// The device tensor behind a handle that cuda_backend() made.
const gpu::DeviceTensor& cuda_tensor(const DeviceHandle& h);
// A handle for a device tensor made elsewhere (the streamed model-map sweep), for cuda_backend().
DeviceHandle cuda_handle(gpu::DeviceTensor t);
// The device tensor behind a cuda_backend() handle, as a placed tensor (sharing its memory).
PlacedTensor cuda_placed(const DeviceHandle& h);

// Device copies of host tensors, made once and reused while the same tensor (same storage,
// shape and dtype) is asked for again: a tensor viewed or swept in many datatypes crosses PCIe
// once. Holds one tensor (the last asked for); safe to share between threads.
class DeviceCache {
 public:
  explicit DeviceCache(std::shared_ptr<DeviceBackend> backend);
  DeviceHandle get(const Tensor& x_f32);
  void clear();              // the device copy's memory goes back now
  uint64_t uploads() const;  // copies made so far
  DeviceBackend& backend() const { return *backend_; }

 private:
  std::shared_ptr<DeviceBackend> backend_;
  mutable std::mutex mu_;
  Tensor host_;  // held so that its storage, the cache key, cannot be reused by another tensor
  DeviceHandle device_;
  uint64_t uploads_ = 0;
};

class Executor {
 public:
  explicit Executor(std::shared_ptr<DeviceBackend> backend);

  DeviceBackend& backend() const { return *backend_; }
  const std::shared_ptr<DeviceBackend>& backend_ptr() const { return backend_; }

  // decide() with the backend's facts now. A cast the CPU takes under Auto counts towards the
  // work after which the GPU is started in the background (placement.cpp's policy).
  Placement place(Work kind, Device requested, int64_t n, const DataType* dtype,
                  OnFailure policy = OnFailure::FallBack);

  // Runs `on_device` when p is CUDA, else `on_host`. An Error from the device under FallBack
  // runs `on_host` instead; once the host has finished (a request the host rejects too is the
  // caller's error, not a device failure) the reason goes to *fallback when given, to the
  // executor's record and, once per process, to the notice handler. Cancelled always passes
  // through, and so does every Error under Throw.
  template <class R, class Dev, class Host>
  R run(const Placement& p, OnFailure policy, Dev&& on_device, Host&& on_host,
        std::string* fallback = nullptr) {
    std::string failure;
    if (p.device == Device::CUDA) {
      try {
        R r = on_device();
        note_device_ran();
        return r;
      } catch (const Cancelled&) {
        throw;
      } catch (const Error& e) {
        if (policy == OnFailure::Throw) throw;
        failure = e.what();
      }
    }
    R r = on_host();
    if (!failure.empty()) record_fallback(p.kind, failure, fallback);
    return r;
  }

  // Casts a tensor that lives in device memory, where it lives: the result stays on the device,
  // in the layout asked for (a compressed layout the kernels do not pack is packed by the host
  // packer and moved back, so every backend hands out the same bits), with its values for an
  // actual or compressed cast. Device::CPU is refused (the caller moves the tensor first).
  // Complete when it returns (gpu::synchronize), so another library can read it.
  PlacedResult cast_resident(const PlacedTensor& x, const DataType& dtype,
                             const CastOptions& options);

  // Device failures that fell back to the host since the executor was made (newest last).
  std::vector<std::string> fallbacks() const;
  void record_fallback(Work kind, const std::string& failure, std::string* out = nullptr);
  void note_device_ran();

 private:
  std::shared_ptr<DeviceBackend> backend_;
  mutable std::mutex mu_;
  std::vector<std::string> fallbacks_;
};

// The process's executor (CUDA backend). A test swaps in its own for a scope with Override.
Executor& current();
class Override {
 public:
  explicit Override(Executor& e);
  ~Override();
  Override(const Override&) = delete;
  Override& operator=(const Override&) = delete;

 private:
  Executor* before_;
};

// One notice per process for device trouble (the first one seen), through set_notice_handler.
void notice_once(const std::string& message);

// A sweep: statistics of one tensor at a time cast to many datatypes (the model map). Decides
// once where the sweep runs; each tensor is uploaded once and cast to every datatype on the
// device. An upload that fails (out of device memory) moves the rest of the sweep to the host;
// a device cast that fails falls back to the host for that cell. Same statistics either way.
class Sweep {
 public:
  // device_possible: the caller's own limits (e.g. rotations run through cast()).
  Sweep(Executor& ex, Device requested, bool device_possible, JobControl* job = nullptr);
  bool on_device() const { return placement_.device == Device::CUDA; }
  const Placement& placement() const { return placement_; }
  std::string backend() const;  // "cuda" / "cpu": where the sweep runs now
  // compute_stats of x cast (virtually) to dtype with options o. Throws Cancelled when the job
  // is cancelled, and Error where the host cast throws (a datatype that does not fit x).
  Stats cast_stats(const Tensor& x, const DataType& dtype, const CastOptions& o);
  // The same, with the host tensor read only when a cell needs it there (a tensor streamed
  // onto the device ahead of its cells is never read on the host when every cell runs there).
  Stats cast_stats(const std::function<const Tensor&()>& host_x, const DataType& dtype,
                   const CastOptions& o);
  // The current tensor's device copy, made elsewhere (the streamed sweep reads and uploads
  // tensors ahead of their cells): its cells use it instead of an upload.
  void use_device_copy(DeviceHandle h) { streamed_ = std::move(h); }
  // Done with the current tensor: its device copy is released.
  void next_tensor();
  uint64_t uploads() const { return cache_.uploads(); }
  // Why the sweep or a cell left the device (empty when nothing did).
  const std::string& fallback() const { return fallback_; }

 private:
  Executor& ex_;
  Placement placement_;
  JobControl* job_;
  DeviceCache cache_;
  DeviceHandle streamed_;
  std::string fallback_;
};

}  // namespace castscope::exec
