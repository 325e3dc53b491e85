// A C++ extension for the C++ API's tests: every entry launches through
// tritonjit::Function (include/tritonjit/function.h), as a libtorch user's code would.
#include <torch/extension.h>
#include <tritonjit/function.h>

#include <atomic>
#include <thread>

namespace {

// out = x + y through the interpreter (CPU tensors) or any backend with tensors
at::Tensor add(const std::string& path, const at::Tensor& x, const at::Tensor& y, int64_t block) {
  auto& f = tritonjit::Function::get_instance(path, "add_kernel");
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.numel();
  f(0, static_cast<unsigned>((n + block - 1) / block), 1, 1, 4, 1, x, y, out, n, block);
  return out;
}

// the same kernel on raw addresses (the recording backend's fake device memory)
void add_ptrs(const std::string& path, uint64_t x, uint64_t y, uint64_t out, int64_t n, int64_t block,
              uint64_t stream, int64_t num_warps) {
  auto& f = tritonjit::Function::get_instance(path, "add_kernel");
  const auto fp32 = c10::ScalarType::Float;
  pybind11::gil_scoped_release nogil;  // a hit must not need Python
  f(stream, static_cast<unsigned>((n + block - 1) / block), 1, 1, static_cast<int>(num_warps), 1,
    tritonjit::DevicePtr{x, fp32}, tritonjit::DevicePtr{y, fp32}, tritonjit::DevicePtr{out, fp32}, n, block);
}

// the Options overload: an extra backend option by name
void add_ptrs_options(const std::string& path, uint64_t x, uint64_t out, int64_t n, uint64_t stream) {
  auto& f = tritonjit::Function::get_instance(path, "add_kernel");
  tritonjit::Options o;
  o.num_warps = 2;
  o.num_stages = 2;
  o.extra.emplace_back("maxnreg", 128);
  const auto fp16 = c10::ScalarType::Half;
  f(stream, tritonjit::Grid{1, 1, 1}, o, tritonjit::DevicePtr{x, fp16}, tritonjit::DevicePtr{x, fp16},
    tritonjit::DevicePtr{out, fp16}, n, 64);
}

// scalars of every C++ kind, a None, a str constexpr
void mixed(const std::string& path, uint64_t p, int64_t stream) {
  auto& f = tritonjit::Function::get_instance(path, "mixed_kernel");
  pybind11::gil_scoped_release nogil;
  f(static_cast<uint64_t>(stream), 2, 3, 1, 4, 1, tritonjit::DevicePtr{p, c10::ScalarType::BFloat16},
    std::optional<at::Tensor>(), static_cast<int32_t>(7), static_cast<uint64_t>(1) << 63, 2.5f, true,
    c10::Scalar(int64_t{16}), "sum");
}

// an annotated kernel (n: tl.int32, scale: tl.float32) given an int64 and a double, or an int
void narrow(const std::string& path, uint64_t x, int64_t n, double scale) {
  auto& f = tritonjit::Function::get_instance(path, "narrow_kernel");
  pybind11::gil_scoped_release nogil;
  f(0, 1, 1, 1, 4, 1, tritonjit::DevicePtr{x, c10::ScalarType::Float}, n, scale, 64);
}
void narrow_int(const std::string& path, uint64_t x, int64_t n, int64_t scale) {
  auto& f = tritonjit::Function::get_instance(path, "narrow_kernel");
  pybind11::gil_scoped_release nogil;
  f(0, 1, 1, 1, 4, 1, tritonjit::DevicePtr{x, c10::ScalarType::Float}, n, scale, 64);
}

// ``threads`` C++ threads launching ``iters`` times each, the GIL released
int64_t hammer(const std::string& path, int64_t threads, int64_t iters, uint64_t base) {
  auto& f = tritonjit::Function::get_instance(path, "add_kernel");
  std::atomic<int64_t> done{0};
  pybind11::gil_scoped_release nogil;
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; t++) {
    pool.emplace_back([&, t] {
      const auto fp32 = c10::ScalarType::Float;
      for (int64_t i = 0; i < iters; i++) {
        f(77, 1, 1, 1, 4, 1, tritonjit::DevicePtr{base + 64 * t, fp32}, tritonjit::DevicePtr{base, fp32},
          tritonjit::DevicePtr{base, fp32}, 1000, 1024);
        done++;
      }
    });
  }
  for (auto& th : pool) th.join();
  return done.load();
}

// out = x + y on the given stream (a raw handle; 0: the current stream)
at::Tensor add_on(const std::string& path, const at::Tensor& x, const at::Tensor& y, int64_t block, uint64_t stream) {
  auto& f = tritonjit::Function::get_instance(path, "add_kernel");
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.numel();
  pybind11::gil_scoped_release nogil;
  f(stream, static_cast<unsigned>((n + block - 1) / block), 1, 1, 4, 1, x, y, out, n, block);
  return out;
}

// ``threads`` C++ threads, each writing outs[t] = x + y ``iters`` times with tensors
void hammer_tensors(const std::string& path, const at::Tensor& x, const at::Tensor& y, std::vector<at::Tensor> outs,
                    int64_t iters) {
  auto& f = tritonjit::Function::get_instance(path, "add_kernel");
  const int64_t n = x.numel();
  pybind11::gil_scoped_release nogil;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < outs.size(); t++) {
    pool.emplace_back([&, t] {
      for (int64_t i = 0; i < iters; i++)
        f(0, static_cast<unsigned>((n + 255) / 256), 1, 1, 4, 1, x, y, outs[t], n, 256);
    });
  }
  for (auto& th : pool) th.join();
}

// a tuple argument (nested; an int 1 in it is a constant of the variant): through Python
at::Tensor tuple_axpby(const std::string& path, const at::Tensor& x, const at::Tensor& y, double a, int64_t b) {
  auto& f = tritonjit::Function::get_instance(path, "tuple_axpby");
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.numel();
  f(0, static_cast<unsigned>((n + 127) / 128), 1, 1, 4, 1, std::make_tuple(x, std::make_tuple(y, out)), n,
    std::make_tuple(a, b), 128);
  return out;
}

// a tuple holding something the kernel cannot take (a str): the Python error, as tritonjit::Error
std::string tuple_error(const std::string& path, const at::Tensor& x) {
  try {
    auto& f = tritonjit::Function::get_instance(path, "tuple_axpby");
    f(0, 1, 1, 1, 4, 1, std::make_tuple(x, std::make_tuple(x, std::string("oops"))), x.numel(),
      std::make_tuple(1.0, 2.0), 128);
  } catch (const tritonjit::Error& e) {
    return e.what();
  }
  return "";
}

// host tensor descriptors, one alone and one inside a tuple: through Python. ``block`` is the
// tile of each program; padding "nan" for the source where asked.
at::Tensor desc_scale(const std::string& path, const at::Tensor& x, double alpha, int64_t bm, int64_t bn,
                      const std::string& padding) {
  auto& f = tritonjit::Function::get_instance(path, "desc_scale");
  at::Tensor out = at::zeros_like(x);
  const auto src = tritonjit::TensorDescriptor::from_tensor(x, {bm, bn}, padding);
  const auto dst = tritonjit::TensorDescriptor::from_tensor(out, {bm, bn});
  f(0, static_cast<unsigned>((x.size(0) + bm - 1) / bm), static_cast<unsigned>((x.size(1) + bn - 1) / bn), 1, 4, 1,
    src, std::make_tuple(alpha, dst), bm, bn);
  return out;
}

// a descriptor Triton refuses (a view whose rows are not 16-byte aligned): its message
std::string desc_error(const std::string& path, const at::Tensor& x) {
  try {
    auto& f = tritonjit::Function::get_instance(path, "desc_scale");
    const at::Tensor v = x.narrow(1, 0, 16);  // rows of x.size(1) elements apart
    const tritonjit::TensorDescriptor d{v, v.sizes().vec(), v.strides().vec(), {16, 16}};
    f(0, 1, 1, 1, 4, 1, d, std::make_tuple(1.0, d), 16, 16);
  } catch (const tritonjit::Error& e) {
    return e.what();
  }
  return "";
}

// what the C++ API throws for a call that cannot work
std::string error_of(const std::string& path, const std::string& which) {
  try {
    auto& f = tritonjit::Function::get_instance(path, "add_kernel");
    at::Tensor x = at::zeros({4});
    if (which == "count") f(0, 1, 1, 1, 4, 1, x, x, x, 4);
    if (which == "constexpr") f(0, 1, 1, 1, 4, 1, x, x, x, 4, x);
    if (which == "grid") f(0, 0, 1, 1, 4, 1, x, x, x, 4, 64);
    if (which == "grid_y") f(0, 1, 1u << 16, 1, 4, 1, x, x, x, 4, 64);
    if (which == "missing") tritonjit::Function::get_instance(path, "no_such_kernel");
    if (which == "autotuned") tritonjit::Function::get_instance(path, "tuned_kernel");
  } catch (const tritonjit::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add", &add);
  m.def("add_ptrs", &add_ptrs);
  m.def("add_ptrs_options", &add_ptrs_options);
  m.def("mixed", &mixed);
  m.def("narrow", &narrow);
  m.def("narrow_int", &narrow_int);
  m.def("hammer", &hammer);
  m.def("error_of", &error_of);
  m.def("add_on", &add_on);
  m.def("hammer_tensors", &hammer_tensors);
  m.def("tuple_axpby", &tuple_axpby);
  m.def("tuple_error", &tuple_error);
  m.def("desc_scale", &desc_scale);
  m.def("desc_error", &desc_error);
}
