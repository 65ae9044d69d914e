// Tensors across the language boundary without copies: inputs are borrowed for the duration of
// a call, results are handed out with a capsule that owns the engine's storage.
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "common.hpp"

namespace castscope::py {

namespace {

using Code = nb::dlpack::dtype_code;

DType from_dlpack(nb::dlpack::dtype d, bool& ok) {
  ok = true;
  const auto code = static_cast<Code>(d.code);
  if (d.lanes == 1) {
    if (code == Code::Float && d.bits == 32) return DType::F32;
    if (code == Code::Float && d.bits == 16) return DType::F16;
    if (code == Code::Float && d.bits == 64) return DType::F64;
    if (code == Code::Bfloat && d.bits == 16) return DType::BF16;
  }
  ok = false;
  return DType::F32;
}

// numpy has no float8 types: there the codes go out as their uint8 bits.
nb::dlpack::dtype to_dlpack(DType d, Framework fw) {
  nb::dlpack::dtype r;
  r.lanes = 1;
  r.bits = static_cast<uint8_t>(dtype_size(d) * 8);
  switch (d) {
    case DType::F32:
    case DType::F16:
    case DType::F64:
      r.code = static_cast<uint8_t>(Code::Float);
      break;
    case DType::BF16:
      r.code = static_cast<uint8_t>(Code::Bfloat);
      break;
    case DType::F8E4M3:
      r.code = static_cast<uint8_t>(fw == Framework::Torch ? Code::Float8_E4M3FN : Code::UInt);
      break;
    case DType::F8E5M2:
      r.code = static_cast<uint8_t>(fw == Framework::Torch ? Code::Float8_E5M2 : Code::UInt);
      break;
    case DType::Bool:
      r.code = static_cast<uint8_t>(Code::Bool);
      break;
    case DType::I8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      r.code = static_cast<uint8_t>(Code::Int);
      break;
    default:
      r.code = static_cast<uint8_t>(Code::UInt);
      break;
  }
  return r;
}

const char* describe(nb::dlpack::dtype d) {
  switch (static_cast<Code>(d.code)) {
    case Code::Int:
      return "a signed integer type";
    case Code::UInt:
      return "an unsigned integer type";
    case Code::Bool:
      return "bool";
    case Code::Complex:
      return "a complex type";
    case Code::Float:
      return d.bits == 8 ? "an 8-bit float type" : "a float type of unsupported width";
    default:
      return "an unsupported element type";
  }
}

template <class FW>
nb::object make_array(void* data, const Shape& shape, nb::handle owner, DType d, int device_type,
                      int device_id, Framework fw) {
  std::vector<size_t> dims(shape.begin(), shape.end());
  nb::ndarray<FW> a(data, dims.size(), dims.data(), owner, nullptr, to_dlpack(d, fw), device_type,
                    device_id);
  return nb::cast(a, nb::rv_policy::reference);
}

nb::object make(void* data, const Shape& shape, nb::handle owner, DType d, int device_type,
                int device_id, Framework fw) {
  if (fw == Framework::Torch)
    return make_array<nb::pytorch>(data, shape, owner, d, device_type, device_id, fw);
  return make_array<nb::numpy>(data, shape, owner, d, device_type, device_id, fw);
}

}  // namespace

Input read_input(nb::ndarray<nb::ro, nb::c_contig> a, const std::string& as_dtype,
                 const char* what) {
  Input in;
  bool ok = false;
  if (!as_dtype.empty()) {
    // The storage is given by name; only its width is checked against the array.
    static const std::pair<const char*, DType> kNames[] = {{"float32", DType::F32},
                                                           {"float16", DType::F16},
                                                           {"bfloat16", DType::BF16},
                                                           {"float64", DType::F64}};
    for (const auto& [name, d] : kNames)
      if (as_dtype == name) {
        in.dtype = d;
        ok = a.dtype().bits == dtype_size(d) * 8;
      }
    if (!ok) throw Error(std::string(what) + ": cannot read the array as '" + as_dtype + "'");
  } else {
    in.dtype = from_dlpack(a.dtype(), ok);
    if (!ok)
      throw Error(std::string(what) + " holds " + describe(a.dtype()) +
                  "; cast needs float32, float16, bfloat16 or float64 data");
  }
  if (a.device_type() == nb::device::cuda::value) {
    in.cuda = true;
  } else if (a.device_type() != nb::device::cpu::value) {
    throw Error(std::string(what) + " is on a device that is neither the CPU nor CUDA");
  }
  in.device_id = a.device_id();
  for (size_t i = 0; i < a.ndim(); ++i) in.shape.push_back(static_cast<int64_t>(a.shape(i)));
  in.array = std::move(a);
  return in;
}

Tensor host_tensor(const Input& in) {
  // The array outlives the call that uses this tensor; the tensor itself owns nothing.
  return Tensor::borrow(in.dtype, in.shape, std::make_shared<int>(0), in.array.data());
}

exec::PlacedTensor device_tensor(const Input& in) {
  return exec::PlacedTensor::borrow_device(in.dtype, in.shape, std::make_shared<int>(0),
                                           const_cast<void*>(in.array.data()));
}

namespace {

struct EngineThread {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  std::thread::id id;
};

EngineThread& engine_thread() {
  // Never destroyed: the thread waits for work until the process exits.
  static EngineThread* t = [] {
    auto* e = new EngineThread;
    std::thread worker([e] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lock(e->mu);
          e->cv.wait(lock, [e] { return !e->tasks.empty(); });
          task = std::move(e->tasks.front());
          e->tasks.pop_front();
        }
        task();
      }
    });
    e->id = worker.get_id();
    worker.detach();
    return e;
  }();
  return *t;
}

}  // namespace

void post(std::function<void()> task) {
  EngineThread& e = engine_thread();
  {
    std::lock_guard<std::mutex> lock(e.mu);
    e.tasks.push_back(std::move(task));
  }
  e.cv.notify_one();
}

bool on_engine_thread() {
  return std::this_thread::get_id() == engine_thread().id;
}

nb::object to_python(const Tensor& t, Framework fw) {
  if (!t) return nb::none();
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  return make(const_cast<void*>(keep->data()), keep->shape(), owner, keep->dtype(),
              nb::device::cpu::value, 0, fw);
}

nb::object to_python(const exec::PlacedTensor& t, Framework fw, int device_id) {
  if (!t) return nb::none();
  if (!t.on_device()) return to_python(t.host(), fw);
  auto* keep = new exec::PlacedTensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<exec::PlacedTensor*>(p); });
  return make(const_cast<void*>(keep->device_data()), keep->shape(), owner, keep->dtype(),
              nb::device::cuda::value, device_id, fw);
}

}  // namespace castscope::py
