// tritonjit's C++ API (header-only, C++17): launch Triton kernels from C++/libtorch
// code through the same runtime objects and variants as Python's tritonjit.function.
//
//   #include <tritonjit/function.h>        // include dir: tritonjit.get_include()
//   auto& f = tritonjit::Function::get_instance("kernels.py", "add_kernel");
//   f(stream, grid_x, grid_y, grid_z, num_warps, num_stages, x, y, out, n, 1024);
//
// Arguments follow the kernel's parameters, constexprs included (passed by value, as
// in Python): at::Tensor, std::optional<at::Tensor> (None), std::nullopt, the integer
// types, float, double, bool, c10::Scalar, a raw device pointer with its dtype
// (tritonjit::DevicePtr), and strings for str constexprs. ``stream`` is the backend's
// native stream handle; 0 means the current stream of the tensors' device. A std::tuple
// of these (nested) is a tuple argument, and a tritonjit::TensorDescriptor a host tensor
// descriptor (Triton's triton.tools.tensor_descriptor.TensorDescriptor); a call with
// either launches through Python (KernelFunction._run, the GIL taken): correct, not fast.
//
// A call whose variant this process already launched from C++ stays in C++: the
// arguments are digested, a key of what can change the variant (dtypes, pointer
// alignment, integer classes, constexpr values, options) is looked up, and the
// backend plugin's C launch entry (tritonjit_launch.h) is called without the GIL.
// A miss takes the GIL and asks the Python runtime for the variant
// (KernelFunction.variant_for: the same cache, compiling where needed, FrozenError
// when frozen), so a variant compiled from Python is a hit from C++ and the other way
// round. Backends without a C launch entry (the interpreter) launch through Python.
// Errors are tritonjit::Error (a std::runtime_error) with the Python message; a Python
// interruption (KeyboardInterrupt, SystemExit) raised in a miss or a Python launch stays
// itself (pybind11::error_already_set), so Ctrl-C during a compile still stops a program.
#pragma once

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../_native/tritonjit_launch.h"

// The per-argument digest functions: one out-of-line copy per C++ type, shared by every
// argument position (a call of many arguments stays a few kilobytes of code, which the
// driver's own work between two launches does not evict as readily as one unrolled
// function per signature), called directly within the extension that includes this
// header (hidden: no PLT stub per argument).
#if defined(__GNUC__)
#define TRITONJIT_LOCAL __attribute__((visibility("hidden")))
#else
#define TRITONJIT_LOCAL
#endif

namespace tritonjit {

/// Every error of the C++ API: the Python runtime's message (kernel, parameter, what
/// was expected), prefixed with the Python exception's type name.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A raw device address with the dtype its kernel parameter should be specialized for.
struct DevicePtr {
  uint64_t address;
  c10::ScalarType dtype;
};
inline DevicePtr pointer(const void* p, c10::ScalarType dtype) {
  return DevicePtr{static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)), dtype};
}

/// A host tensor descriptor: Triton's ``TensorDescriptor(base, shape, strides, block_shape,
/// padding)``, for kernels that take one (``desc.load([m, n])``; TMA on sm_90). Triton
/// checks it when the call reaches Python (16-byte aligned base and strides, last stride
/// 1, padding "zero" or "nan"): a bad one raises tritonjit::Error with Triton's message.
struct TensorDescriptor {
  at::Tensor base;
  std::vector<int64_t> shape, strides, block_shape;
  std::string padding = "zero";

  /// The descriptor of all of ``t`` (its sizes and strides), as Triton's from_tensor.
  static TensorDescriptor from_tensor(const at::Tensor& t, std::vector<int64_t> block_shape,
                                      std::string padding = "zero") {
    return TensorDescriptor{t, t.sizes().vec(), t.strides().vec(), std::move(block_shape), std::move(padding)};
  }
};

/// A value of a backend compile option (Options::extra).
struct OptionValue {
  enum class Kind { Int, Float, Bool, Str } kind;
  int64_t i = 0;
  double d = 0;
  std::string s;
  OptionValue(int v) : kind(Kind::Int), i(v) {}
  OptionValue(int64_t v) : kind(Kind::Int), i(v) {}
  OptionValue(double v) : kind(Kind::Float), d(v) {}
  OptionValue(bool v) : kind(Kind::Bool), i(v) {}
  OptionValue(const char* v) : kind(Kind::Str), s(v) {}
  OptionValue(std::string v) : kind(Kind::Str), s(std::move(v)) {}
};

/// Launch options: num_warps, num_stages (0: not given, Triton's default) and any other
/// option Triton's backend takes (num_ctas, maxnreg, debug, ...), by name.
struct Options {
  int num_warps = 4;
  int num_stages = 3;
  std::vector<std::pair<std::string, OptionValue>> extra;
};

/// One launch grid: every dimension >= 1; past x < 2^31, y and z < 2^16 the backend's
/// declared limits decide (through the Python path).
struct Grid {
  unsigned int x = 1, y = 1, z = 1;
};

/// One digested argument: what the launch ABI takes, plus what the key and the Python
/// bridge need. Library authors who digest arguments themselves (tritonjit_ops' C++
/// operator path) fill these and call Function::launch.
struct Slot {
  enum class Kind : uint8_t { None, Tensor, Ptr, Int, UInt, Float, Bool, Str };
  Kind kind = Kind::None;
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // Tensor, Ptr
  int8_t device_type = -1;                             // Tensor: c10::DeviceType
  int device = -1;                                     // Tensor: device index (-1: CPU)
  union {
    int64_t i;
    uint64_t u;
    double d;
  } v{0};
  const at::Tensor* tensor = nullptr;  // Tensor: the caller's, alive during the call
  std::string_view str;                // Str

  static Slot none() { return Slot{}; }
  static Slot of(const at::Tensor& t) {
    Slot s;
    s.kind = Kind::Tensor;
    s.tensor = &t;
    s.dtype = t.scalar_type();
    s.device_type = static_cast<int8_t>(t.device().type());
    s.device = t.device().has_index() ? t.device().index() : -1;
    s.v.u = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
    return s;
  }
  static Slot of_int(int64_t x) {
    Slot s;
    s.kind = Kind::Int;
    s.v.i = x;
    return s;
  }
  static Slot of_uint(uint64_t x) {
    Slot s;
    s.kind = x > static_cast<uint64_t>(INT64_MAX) ? Kind::UInt : Kind::Int;
    s.v.u = x;
    return s;
  }
  static Slot of_float(double x) {
    Slot s;
    s.kind = Kind::Float;
    s.v.d = x;
    return s;
  }
  static Slot of_bool(bool x) {
    Slot s;
    s.kind = Kind::Bool;
    s.v.i = x;
    return s;
  }
  static Slot of_ptr(DevicePtr p) {
    Slot s;
    s.kind = Kind::Ptr;
    s.dtype = p.dtype;
    s.v.u = p.address;
    return s;
  }
  static Slot of_str(std::string_view x) {
    Slot s;
    s.kind = Kind::Str;
    s.str = x;
    return s;
  }
};

namespace detail {

/// The GIL for the scope (re-entrant: a thread that holds it keeps it).
class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

/// Owned Python reference (decref needs the GIL: only destroyed while it is held).
struct Ref {
  PyObject* p = nullptr;
  Ref() = default;
  explicit Ref(PyObject* o) : p(o) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& o) noexcept : p(o.p) { o.p = nullptr; }
  ~Ref() { Py_XDECREF(p); }
  PyObject* release() {
    PyObject* r = p;
    p = nullptr;
    return r;
  }
};

/// The pending Python exception as a tritonjit::Error (call with the GIL held). An
/// interruption (a BaseException that is not an Exception: KeyboardInterrupt, SystemExit)
/// is not an error of the call: it stays itself, thrown as pybind11::error_already_set,
/// which pybind11 and torch's bindings restore when it reaches Python.
[[noreturn]] inline void throw_python_error(const std::string& context) {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (type != nullptr && !PyErr_GivenExceptionMatches(type, PyExc_Exception)) {
    PyErr_Restore(type, value, tb);
    throw pybind11::error_already_set();
  }
  std::string msg = context;
  if (type != nullptr) {
    const char* name = reinterpret_cast<PyTypeObject*>(type)->tp_name;
    const char* dot = std::strrchr(name, '.');
    msg += dot ? dot + 1 : name;
    PyObject* text = value ? PyObject_Str(value) : nullptr;
    const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
    if (utf8 != nullptr) {
      msg += ": ";
      msg += utf8;
    }
    Py_XDECREF(text);
  } else {
    msg += "error without a Python exception";
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  throw Error(msg);
}

inline PyObject* check(PyObject* o, const std::string& context) {
  if (o == nullptr) throw_python_error(context);
  return o;
}

inline uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

constexpr int kMaxWords = 160;

/// The part of a call that selects a variant: one or two words per argument (tag,
/// dtype, alignment and integer class; a constexpr's value), the options, the device.
struct Key {
  uint64_t w[kMaxWords];
  int n = 0;
  // Unchecked: a launch pushes at most two words per parameter and three more, and
  // Function refuses kernels whose parameters could not fit (refresh_spec_locked_gil).
  C10_ALWAYS_INLINE void push(uint64_t x) { w[n++] = x; }
  bool operator==(const Key& o) const { return n == o.n && std::memcmp(w, o.w, sizeof(uint64_t) * n) == 0; }
  void assign(const Key& o) {  // the n words in use, not the whole array
    n = o.n;
    std::memcpy(w, o.w, sizeof(uint64_t) * n);
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = static_cast<uint64_t>(k.n);
    for (int i = 0; i < k.n; i++) h = mix(h, k.w[i]);
    return static_cast<size_t>(h);
  }
};

/// A variant ready to launch: the plugin's C entry (or, without one, Python).
struct Entry {
  const tj_launch* tj = nullptr;
  PyObject* keep = nullptr;  // the capsule (keeps ``tj`` and its launcher alive); never released
  bool packs = false;        // its layout may be packed by (tj_pack_layout_ok, checked once)
};

/// The call's device parameters packed as the launcher the thread used last for this
/// Function lays them out (TJ_LAUNCH_F_PACKED): written while the arguments are digested,
/// launched as they are where the call's key turns out to be that launch's. Each value
/// is checked against its slot's code (tj_pack_fits; ``bad``: launch through the tj_args
/// instead, where the launcher converts it or raises its precise error). Without such a
/// launcher every write goes to offset 0 of ``buf`` (``layout`` is no_layout) and nothing
/// is launched from it.
struct Packer {
  static constexpr size_t kMaxParams = kMaxWords / 2;
  const tj_pack_slot* layout;
  const tj_launch* tj = nullptr;  // whose layout it is; nullptr: none
  bool bad = false;
  alignas(64) unsigned char buf[TJ_PACK_BUF_MAX];

  static const tj_pack_slot* no_layout() {
    static const tj_pack_slot none[kMaxParams] = {};
    return none;
  }
  Packer() : layout(no_layout()) {}
  void use(const tj_launch* t) {
    tj = t;
    layout = t->layout;
  }
  // Argument i into its slot, by the kind the caller digested it as: tj_pack_fits and
  // tj_pack_write (tritonjit_launch.h) spelled out per kind, so that the value is written
  // from a register and checked without the switch on its tj_arg's kind (a call through a
  // jump table per argument: a quarter of a 58-argument launch's host time). ``bad`` where
  // it does not fit.
  C10_ALWAYS_INLINE void word(size_t i, uint64_t w) { std::memcpy(buf + layout[i].offset, &w, 8); }
  C10_ALWAYS_INLINE void ptr(size_t i, uint64_t address) {
    bad |= layout[i].code != TJ_PACK_PTR;
    word(i, address);
  }
  C10_ALWAYS_INLINE void none(size_t i) {
    const uint8_t c = layout[i].code;
    bad |= c != TJ_PACK_SKIP && c != TJ_PACK_PTR;
    word(i, 0);
  }
  // ``in32``: x in [-2**31, 2**31), which the caller has computed for the key
  C10_ALWAYS_INLINE void int64(size_t i, int64_t x, bool in32) {
    const uint8_t c = layout[i].code;
    bad |= !(c == TJ_PACK_I64 || c == TJ_PACK_SKIP || (c == TJ_PACK_I32 && in32) || (c == TJ_PACK_U64 && x >= 0));
    word(i, static_cast<uint64_t>(x));
  }
  C10_ALWAYS_INLINE void uint64(size_t i, uint64_t x) {
    bad |= layout[i].code != TJ_PACK_U64;
    word(i, x);
  }
  C10_ALWAYS_INLINE void real(size_t i, double x) {
    const uint8_t c = layout[i].code;
    uint64_t w;
    if (c == TJ_PACK_FP32) {
      const float f = static_cast<float>(x);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      w = b;
    } else {
      bad |= c != TJ_PACK_FP64;
      std::memcpy(&w, &x, 8);
    }
    word(i, w);
  }
  C10_ALWAYS_INLINE void boolean(size_t i, bool b) {
    bad |= layout[i].code != TJ_PACK_B8;
    word(i, b ? 1 : 0);
  }
};

/// A call being digested: the key words, the launch ABI's arguments, the tensors' device
/// and the packed parameters.
struct Digest {
  Key key;
  tj_arg args[kMaxWords / 2];
  int device = -1;       // of the tensor arguments; -1: none yet
  int8_t dev_type = -1;  // their c10::DeviceType
  Packer pk;
};

/// The variant a thread launched last through one Function (its id and cache generation):
/// most launches repeat it, and this copy answers them without the cache's shared lock
/// (two atomic read-modify-writes) and without hashing the key.
struct LastHit {
  uint64_t id = 0;  // Function ids start at 1
  uint64_t gen = 0;
  Key key;
  Entry e;
};
inline LastHit& last_hit(uint64_t id) {
  thread_local LastHit slots[8];  // by id: a few kernels launched in turn keep their entries
  return slots[id & 7];
}
inline uint64_t next_function_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// torch's device type of a backend's tensors; a type torch does not know (a test
// backend's) counts as PrivateUse1, for which no device guard is registered.
inline c10::DeviceType device_type_of(const std::string& torch_type) {
  if (torch_type.empty() || torch_type == "cpu") return c10::DeviceType::CPU;
  try {
    return c10::Device(torch_type).type();
  } catch (const std::exception&) {
    return c10::DeviceType::PrivateUse1;
  }
}

template <typename T>
struct is_tuple : std::false_type {};
template <typename... T>
struct is_tuple<std::tuple<T...>> : std::true_type {};
template <typename T>
inline constexpr bool is_tuple_v = is_tuple<std::decay_t<T>>::value;
template <typename T>
inline constexpr bool is_descriptor_v = std::is_same_v<std::decay_t<T>, TensorDescriptor>;
/// Arguments only Python takes (tuples, tensor descriptors): their call goes through it.
template <typename T>
inline constexpr bool via_python_v = is_tuple_v<T> || is_descriptor_v<T>;

inline PyObject* dtype_object(c10::ScalarType t) {
  PyObject* d = reinterpret_cast<PyObject*>(torch::getTHPDtype(t));
  Py_INCREF(d);
  return d;
}

}  // namespace detail

/// The C++ face of one tritonjit.KernelFunction.
class Function {
 public:
  /// The kernel ``name`` of the Python file ``path``: the same runtime object as
  /// ``tritonjit.function(path, name)`` in Python; one per (path, name) per process.
  static Function& get_instance(std::string_view path, std::string_view name) {
    static std::mutex mu;
    static std::unordered_map<std::string, std::unique_ptr<Function>> instances;
    std::string key = std::string(path) + '\0' + std::string(name);
    std::lock_guard<std::mutex> lock(mu);
    auto it = instances.find(key);
    if (it != instances.end()) return *it->second;
    detail::Gil gil;
    detail::Ref mod(detail::check(PyImport_ImportModule("tritonjit"), "tritonjit: cannot import tritonjit: "));
    detail::Ref fn(detail::check(PyObject_GetAttrString(mod.p, "function"), "tritonjit: "));
    detail::Ref py_path(detail::check(
        PyUnicode_FromStringAndSize(path.data(), static_cast<Py_ssize_t>(path.size())), "tritonjit: "));
    detail::Ref py_name(detail::check(
        PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())), "tritonjit: "));
    detail::Ref kf(detail::check(PyObject_CallFunctionObjArgs(fn.p, py_path.p, py_name.p, nullptr),
                                 "tritonjit::Function::get_instance: "));
    auto f = std::unique_ptr<Function>(new Function(kf.release()));
    Function& ref = *f;
    instances.emplace(std::move(key), std::move(f));
    return ref;
  }

  /// Wrap a tritonjit.KernelFunction (a new reference is taken; call with the GIL).
  static std::unique_ptr<Function> from_object(PyObject* kernel_function) {
    Py_INCREF(kernel_function);
    return std::unique_ptr<Function>(new Function(kernel_function));
  }

  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  ~Function() = default;  // objects live until process exit: Python may be gone by then

  /// f(stream, grid_x, grid_y, grid_z, num_warps, num_stages, args...), libtriton_jit's call.
  template <typename... Args>
  void operator()(uint64_t stream, unsigned int gx, unsigned int gy, unsigned int gz, int num_warps, int num_stages,
                  const Args&... args) {
    Options o;
    o.num_warps = num_warps;
    o.num_stages = num_stages;
    (*this)(stream, Grid{gx, gy, gz}, o, args...);
  }

  /// The same with an Options object (any backend option by name).
  template <typename... Args>
  void operator()(uint64_t stream, Grid grid, const Options& options, const Args&... args) {
    if constexpr ((detail::via_python_v<Args> || ...)) {
      launch_through_python(stream, grid, options, args...);
    } else {
      // each argument digested by its static type (no Slot, no switch on its kind); the
      // Slots are only made where Python is asked (a miss, a backend without a C entry)
      begin(grid, sizeof...(Args));
      detail::Digest d;
      expect_last(d.pk);
      size_t i = 0;
      (digest(i++, args, d), ...);
      finish(stream, grid, options, d, [&](auto&& use) {
        if constexpr (sizeof...(Args) == 0) {
          use(static_cast<const Slot*>(nullptr), size_t{0});
        } else {
          const Slot slots[] = {slot(args)...};
          use(static_cast<const Slot*>(slots), sizeof...(Args));
        }
      });
    }
  }

  /// Launch with digested arguments (one Slot per kernel parameter, in order).
  void launch(uint64_t stream, Grid grid, const Options& options, const Slot* slots, size_t n) {
    begin(grid, n);
    detail::Digest d;
    expect_last(d.pk);
    for (size_t i = 0; i < n; i++) digest_slot(i, slots[i], d);
    finish(stream, grid, options, d, [&](auto&& use) { use(slots, n); });
  }

  /// The Python runtime object (a borrowed reference).
  PyObject* object() const { return kf_; }
  const std::string& name() const { return name_; }

  /// Forget the variants remembered by C++ (the Python runtime keeps its own).
  void clear() {
    std::unique_lock<std::shared_mutex> lock(mu_);
    cache_.clear();
    gen_.fetch_add(1, std::memory_order_release);
  }

 private:
  explicit Function(PyObject* kf) : kf_(kf) {
    detail::Gil gil;
    refresh_spec_locked_gil();
  }

  // ---- the kernel's facts on the active backend (KernelFunction.native_spec) -------------
  void refresh_spec_locked_gil() {
    detail::Ref spec(detail::check(PyObject_CallMethod(kf_, "native_spec", nullptr), "tritonjit: "));
    PyObject *name, *cflags, *names, *backend_name, *torch_type;
    int div, exact;
    if (!PyArg_ParseTuple(spec.p, "UOOipUU", &name, &cflags, &names, &div, &exact, &backend_name, &torch_type))
      detail::throw_python_error("tritonjit: native_spec: ");
    name_ = PyUnicode_AsUTF8(name);
    constexpr_.clear();
    param_names_.clear();
    for (Py_ssize_t i = 0; i < PyTuple_Size(cflags); i++) {
      constexpr_.push_back(PyTuple_GET_ITEM(cflags, i) == Py_True ? 1 : 0);
      param_names_.emplace_back(PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i)));
    }
    nparams_ = constexpr_.size();
    if (2 * nparams_ + 4 > static_cast<size_t>(detail::kMaxWords))
      throw Error("tritonjit: kernel '" + name_ + "' has too many parameters for the C++ API");
    div_ = static_cast<uint64_t>(div);
    div_mask_ = (div_ != 0 && (div_ & (div_ - 1)) == 0) ? div_ - 1 : 0;
    exact_ints_ = exact != 0;
    torch_type_ = PyUnicode_AsUTF8(torch_type);
    device_type_ = detail::device_type_of(torch_type_);
    guarded_ = device_type_ != c10::DeviceType::CPU && c10::impl::hasDeviceGuardImpl(device_type_);
    // the backend the spec belongs to: registry.current_cell[0]
    detail::Ref mod(detail::check(PyImport_ImportModule("tritonjit._registry"), "tritonjit: "));
    detail::Ref reg(detail::check(PyObject_GetAttrString(mod.p, "registry"), "tritonjit: "));
    PyObject* cell = detail::check(PyObject_GetAttrString(reg.p, "current_cell"), "tritonjit: ");
    Py_XSETREF(cell_, cell);
    PyObject* backend = PyList_GET_ITEM(cell_, 0);
    Py_XINCREF(backend);
    Py_XSETREF(backend_, backend);
  }

  // set_backend() may switch the backend: its cell is read without the GIL (a one-item
  // list, never resized; a stale read only delays the refresh to the next call).
  void ensure_spec() {
    if (PyList_GET_ITEM(cell_, 0) == backend_ && backend_ != nullptr) return;
    detail::Gil gil;
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (PyList_GET_ITEM(cell_, 0) == backend_ && backend_ != nullptr) return;
    refresh_spec_locked_gil();  // native_spec() selects the backend where none is yet
    cache_.clear();
    gen_.fetch_add(1, std::memory_order_release);
  }

  std::string params_text() const {
    std::string s;
    for (size_t i = 0; i < param_names_.size(); i++) s += (i ? ", " : "") + param_names_[i];
    return s;
  }

  // ---- C++ values -> slots ---------------------------------------------------------------
  static Slot slot(const at::Tensor& t) { return t.defined() ? Slot::of(t) : Slot::none(); }
  static Slot slot(const std::optional<at::Tensor>& t) {
    return t.has_value() && t->defined() ? Slot::of(*t) : Slot::none();
  }
  static Slot slot(std::nullopt_t) { return Slot::none(); }
  static Slot slot(std::nullptr_t) { return Slot::none(); }
  static Slot slot(bool b) { return Slot::of_bool(b); }
  static Slot slot(float x) { return Slot::of_float(x); }
  static Slot slot(double x) { return Slot::of_float(x); }
  static Slot slot(DevicePtr p) { return Slot::of_ptr(p); }
  static Slot slot(const char* x) { return Slot::of_str(x); }
  static Slot slot(const std::string& x) { return Slot::of_str(x); }
  static Slot slot(std::string_view x) { return Slot::of_str(x); }
  static Slot slot(const c10::Scalar& x) {
    if (x.isBoolean()) return Slot::of_bool(x.toBool());
    if (x.isIntegral(false)) return Slot::of_int(x.toLong());
    if (x.isFloatingPoint()) return Slot::of_float(x.toDouble());
    throw Error("tritonjit: a complex or symbolic c10::Scalar cannot be a kernel argument");
  }
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  static Slot slot(T x) {
    if constexpr (std::is_unsigned_v<T>)
      return Slot::of_uint(static_cast<uint64_t>(x));
    else
      return Slot::of_int(static_cast<int64_t>(x));
  }
  // (tuples and descriptors never reach slot(): operator() sends those calls to launch_through_python)

  // ---- a call: checks, digest, variant, launch ----------------------------------------------
  void begin(const Grid& grid, size_t n) {
    check_grid(grid);
    ensure_spec();
    if (n != nparams_)
      throw Error("tritonjit: kernel '" + name_ + "' takes " + std::to_string(nparams_) + " arguments (" + params_text() +
                  "), got " + std::to_string(n));
  }

  // ``with_slots(use)`` calls use(const Slot*, n) with the call's arguments as Slots.
  template <typename WithSlots>
  void finish(uint64_t stream, const Grid& grid, const Options& options, detail::Digest& d, WithSlots&& with_slots) {
    const bool big_grid = grid.x >= (1u << 31) || grid.y >= (1u << 16) || grid.z >= (1u << 16);
    d.key.push(static_cast<uint64_t>(options.num_warps) << 32 | static_cast<uint32_t>(options.num_stages));
    if (!options.extra.empty()) d.key.push(hash_options(options));
    if (d.device < 0) d.device = current_device();
    d.key.push(static_cast<uint64_t>(static_cast<uint32_t>(d.device)) << 8 | static_cast<uint8_t>(d.dev_type));
    detail::Entry e;
    if (!lookup(d.key, e))
      with_slots([&](const Slot* slots, size_t n) { e = resolve(d.key, slots, n, options, d.device); });
    // no C entry, or a grid past the core's limits (a backend may declare larger ones): Python decides
    if (e.tj == nullptr || big_grid) {
      with_slots([&](const Slot* slots, size_t n) { launch_python(stream, grid, options, slots, n, d.device); });
      return;
    }
    if (stream == 0) stream = current_stream(e, d.dev_type, d.device);
    const unsigned int g[3] = {grid.x, grid.y, grid.z};
    const auto nargs = static_cast<Py_ssize_t>(nparams_);
    if (d.pk.tj == e.tj && !d.pk.bad) {  // packed by this variant's layout while digesting
      char err[512];
      int rc = e.tj->launch_packed_nogil(e.tj->self, g, stream, d.pk.buf, err, sizeof err);
      if (rc == 0) return;
      if (rc < 0) throw Error(std::string("tritonjit: ") + err);
    }
    if (e.tj->flags & TJ_LAUNCH_F_NOGIL) {
      char err[512];
      int rc = e.tj->launch_nogil(e.tj->self, g, stream, d.args, nargs, err, sizeof err);
      if (rc == 0) return;
      if (rc < 0) throw Error(std::string("tritonjit: ") + err);
    }
    detail::Gil gil;  // no GIL-free entry, or it needs Python: the plugin's own launch
    if (e.tj->launch(e.tj->self, g, stream, d.args, nargs) < 0)
      detail::throw_python_error("tritonjit: kernel '" + name_ + "': ");
  }

  // ---- arguments -> key words and launch arguments ----------------------------------------
  // One put_* per kind of value, shared by the static path (digest(), by C++ type) and the
  // Slot path (digest_slot(), by Slot::Kind), so both make the same key for the same call.
  // argument i's tj_arg, its Python object (none from C++) and padding cleared
  C10_ALWAYS_INLINE static tj_arg& fresh(size_t i, detail::Digest& d) {
    tj_arg& a = d.args[i];
    a.obj = nullptr;
    a._pad = 0;
    return a;
  }
  // a constexpr parameter's value: its tag and value word (true), or false for a runtime one
  C10_ALWAYS_INLINE bool put_constant(size_t i, tj_arg& a, uint64_t tag, uint64_t value, detail::Digest& d) const {
    if (!constexpr_[i]) return false;
    a.kind = TJ_ARG_CONST;
    d.key.push(tag);
    d.key.push(value);
    return true;
  }
  C10_ALWAYS_INLINE void put_ptr(size_t i, uint64_t address, c10::ScalarType dtype, int8_t dev_type, detail::Digest& d,
                                 const char* what) const {
    tj_arg& a = fresh(i, d);
    a.v.u = address;
    if (constexpr_[i]) not_constant(i, what);
    a.kind = TJ_ARG_PTR;
    d.pk.ptr(i, address);
    const uint64_t aligned = divisible(address) ? 1 : 0;
    d.key.push(1 | static_cast<uint64_t>(static_cast<uint8_t>(dtype)) << 8 | aligned << 16 |
               static_cast<uint64_t>(static_cast<uint8_t>(dev_type)) << 24);
  }
  C10_ALWAYS_INLINE void put_tensor(size_t i, const at::Tensor& t, detail::Digest& d) const {
    const c10::Device dev = t.device();
    const auto type = static_cast<int8_t>(dev.type());
    put_ptr(i, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr())), t.scalar_type(), type, d, "a tensor");
    on_device(i, type, dev.has_index() ? dev.index() : -1, t, d);
  }
  // the launch's device is its first tensor's; every later tensor must be on it
  C10_ALWAYS_INLINE void on_device(size_t i, int8_t type, int index, const at::Tensor& t, detail::Digest& d) const {
    if (d.dev_type < 0) {
      d.dev_type = type;
      d.device = index;
    } else if (type != d.dev_type || index != d.device) {
      on_another_device(i, t);
    }
  }
  [[noreturn]] C10_NOINLINE void on_another_device(size_t i, const at::Tensor& t) const {
    throw Error("tritonjit: parameter '" + param_names_[i] + "' of kernel '" + name_ + "' is on device " +
                t.device().str() + " but an earlier tensor argument is on another device; the tensors of one "
                "launch must be on one device");
  }
  C10_ALWAYS_INLINE void put_int(size_t i, int64_t x, detail::Digest& d) const {
    tj_arg& a = fresh(i, d);
    a.v.i = x;
    if (put_constant(i, a, 7, static_cast<uint64_t>(x), d)) return;
    a.kind = TJ_ARG_INT;
    const bool in32 = x >= INT32_MIN && x <= INT32_MAX;
    d.pk.int64(i, x, in32);
    uint64_t cls = in32 ? 1 : 0;
    cls |= (x == 1) ? 2 : 0;
    cls |= divisible(static_cast<uint64_t>(x)) ? 4 : 0;
    d.key.push(3 | cls << 8);
    if (exact_ints_) d.key.push(static_cast<uint64_t>(x));
  }
  C10_ALWAYS_INLINE void put_uint(size_t i, uint64_t x, detail::Digest& d) const {
    if (x <= static_cast<uint64_t>(INT64_MAX)) return put_int(i, static_cast<int64_t>(x), d);
    tj_arg& a = fresh(i, d);
    a.v.u = x;
    if (put_constant(i, a, 8, x, d)) return;
    a.kind = TJ_ARG_UINT;
    d.pk.uint64(i, x);
    d.key.push(4 | (divisible(x) ? 1ull << 8 : 0));
    if (exact_ints_) d.key.push(x);
  }
  C10_ALWAYS_INLINE void put_float(size_t i, double x, detail::Digest& d) const {
    tj_arg& a = fresh(i, d);
    a.v.d = x;
    if (put_constant(i, a, 9, a.v.u, d)) return;
    a.kind = TJ_ARG_FLOAT;
    d.pk.real(i, x);
    d.key.push(5);
    if (exact_ints_) d.key.push(a.v.u);
  }
  C10_ALWAYS_INLINE void put_bool(size_t i, bool b, detail::Digest& d) const {
    tj_arg& a = fresh(i, d);
    a.v.i = b;
    const uint64_t bit = static_cast<uint64_t>(b) << 8;
    if (constexpr_[i]) {
      a.kind = TJ_ARG_CONST;
      d.key.push(10 | bit);
      return;
    }
    a.kind = TJ_ARG_BOOL;
    d.pk.boolean(i, b);
    d.key.push(6 | (exact_ints_ ? bit : 0));
  }
  C10_ALWAYS_INLINE void put_none(size_t i, detail::Digest& d) const {
    tj_arg& a = fresh(i, d);
    a.v.u = 0;
    a.kind = constexpr_[i] ? TJ_ARG_CONST : TJ_ARG_NONE;
    d.key.push(constexpr_[i] ? 12 : 2);
    if (!constexpr_[i]) d.pk.none(i);
  }
  void put_str(size_t i, std::string_view x, detail::Digest& d) const {
    if (!constexpr_[i])
      throw Error("tritonjit: parameter '" + param_names_[i] + "' of kernel '" + name_ +
                  "': a string is only valid for a tl.constexpr parameter");
    tj_arg& a = fresh(i, d);
    a.v.u = 0;
    a.kind = TJ_ARG_CONST;
    d.key.push(11 | static_cast<uint64_t>(x.size()) << 8);
    d.key.push(detail::hash_bytes(x));
  }
  [[noreturn]] C10_NOINLINE void not_constant(size_t i, const char* what) const {
    throw Error("tritonjit: parameter '" + param_names_[i] + "' of kernel '" + name_ +
                "' is a tl.constexpr and needs a compile-time constant (int, float, bool, str or None), got " + what);
  }

  // by C++ type (the call's own arguments)
  TRITONJIT_LOCAL void digest(size_t i, const at::Tensor& t, detail::Digest& d) const {
    if (t.defined()) put_tensor(i, t, d); else put_none(i, d);
  }
  TRITONJIT_LOCAL void digest(size_t i, const std::optional<at::Tensor>& t, detail::Digest& d) const {
    if (t.has_value() && t->defined()) put_tensor(i, *t, d); else put_none(i, d);
  }
  TRITONJIT_LOCAL void digest(size_t i, std::nullopt_t, detail::Digest& d) const { put_none(i, d); }
  TRITONJIT_LOCAL void digest(size_t i, std::nullptr_t, detail::Digest& d) const { put_none(i, d); }
  TRITONJIT_LOCAL void digest(size_t i, bool b, detail::Digest& d) const { put_bool(i, b, d); }
  TRITONJIT_LOCAL void digest(size_t i, float x, detail::Digest& d) const { put_float(i, x, d); }
  TRITONJIT_LOCAL void digest(size_t i, double x, detail::Digest& d) const { put_float(i, x, d); }
  TRITONJIT_LOCAL void digest(size_t i, DevicePtr p, detail::Digest& d) const { put_ptr(i, p.address, p.dtype, -1, d, "a pointer"); }
  TRITONJIT_LOCAL void digest(size_t i, const char* x, detail::Digest& d) const { put_str(i, x, d); }
  TRITONJIT_LOCAL void digest(size_t i, const std::string& x, detail::Digest& d) const { put_str(i, x, d); }
  TRITONJIT_LOCAL void digest(size_t i, std::string_view x, detail::Digest& d) const { put_str(i, x, d); }
  TRITONJIT_LOCAL void digest(size_t i, const c10::Scalar& x, detail::Digest& d) const { digest_slot(i, slot(x), d); }
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  TRITONJIT_LOCAL void digest(size_t i, T x, detail::Digest& d) const {
    if constexpr (std::is_unsigned_v<T>)
      put_uint(i, static_cast<uint64_t>(x), d);
    else
      put_int(i, static_cast<int64_t>(x), d);
  }

  // by Slot::Kind (arguments a library digested itself)
  void digest_slot(size_t i, const Slot& s, detail::Digest& d) const {
    switch (s.kind) {
      case Slot::Kind::Tensor:
        put_ptr(i, s.v.u, s.dtype, s.device_type, d, "a tensor");
        on_device(i, s.device_type, s.device, *s.tensor, d);
        break;
      case Slot::Kind::Ptr: put_ptr(i, s.v.u, s.dtype, s.device_type, d, "a pointer"); break;
      case Slot::Kind::None: put_none(i, d); break;
      case Slot::Kind::Int: put_int(i, s.v.i, d); break;
      case Slot::Kind::UInt: put_uint(i, s.v.u, d); break;
      case Slot::Kind::Float: put_float(i, s.v.d, d); break;
      case Slot::Kind::Bool: put_bool(i, s.v.i != 0, d); break;
      case Slot::Kind::Str: put_str(i, s.str, d); break;
    }
  }

  // divisible by the backend's divisibility: a mask for a power of two (two's complement
  // makes it exact for negative ints too), a division otherwise; never with div 0
  C10_ALWAYS_INLINE bool divisible(uint64_t x) const {
    return div_mask_ != 0 ? (x & div_mask_) == 0 : (div_ != 0 && static_cast<int64_t>(x) % static_cast<int64_t>(div_) == 0);
  }

  static uint64_t hash_options(const Options& o) {
    uint64_t h = 0x51ed27;
    for (const auto& kv : o.extra) {
      h = detail::mix(h, detail::hash_bytes(kv.first));
      h = detail::mix(h, static_cast<uint64_t>(kv.second.kind));
      h = detail::mix(h, kv.second.kind == OptionValue::Kind::Str ? detail::hash_bytes(kv.second.s)
                         : kv.second.kind == OptionValue::Kind::Float
                             ? [&] { uint64_t b; std::memcpy(&b, &kv.second.d, 8); return b; }()
                             : static_cast<uint64_t>(kv.second.i));
    }
    return h;
  }

  static void check_grid(const Grid& g) {
    if (g.x < 1 || g.y < 1 || g.z < 1)
      throw Error("tritonjit: grid (" + std::to_string(g.x) + ", " + std::to_string(g.y) + ", " + std::to_string(g.z) +
                  ") has a zero dimension: every dimension must be >= 1");
  }

  // The backend's current device where no tensor says it: from torch's device guard
  // for torch's device types, else from the plugin (Python).
  int current_device() const {
    if (device_type_ == c10::DeviceType::CPU) return 0;
    if (guarded_) return c10::impl::getDeviceGuardImpl(device_type_)->getDevice().index();
    detail::Gil gil;
    detail::Ref r(detail::check(PyObject_CallMethod(backend_, "current_device", nullptr), "tritonjit: "));
    return static_cast<int>(PyLong_AsLong(r.p));
  }

  // The current stream of ``device``: torch's (no Python) for torch's device types,
  // else the plugin's C entry or its current_stream hook (with the GIL).
  uint64_t current_stream(const detail::Entry& e, int8_t dev_type, int device) const {
    const c10::DeviceType type = dev_type >= 0 ? static_cast<c10::DeviceType>(dev_type) : device_type_;
    if (type == c10::DeviceType::CPU) return 0;
    if (type == device_type_ ? guarded_ : c10::impl::hasDeviceGuardImpl(type)) {
      const c10::Stream st =
          c10::impl::getDeviceGuardImpl(type)->getStream(c10::Device(type, static_cast<c10::DeviceIndex>(device)));
      return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(st.native_handle()));
    }
    detail::Gil gil;
    uint64_t out = 0;
    if (e.tj != nullptr && e.tj->current_stream != nullptr) {
      if (e.tj->current_stream(e.tj->self, device, &out) < 0) detail::throw_python_error("tritonjit: ");
      return out;
    }
    detail::Ref r(detail::check(PyObject_CallMethod(backend_, "current_stream", "i", device), "tritonjit: "));
    out = PyLong_AsUnsignedLongLong(r.p);
    if (PyErr_Occurred()) detail::throw_python_error("tritonjit: current_stream: ");
    return out;
  }

  // ---- the variant cache --------------------------------------------------------------
  // The thread's last variant, else the shared cache: true and ``e`` set on a hit.
  bool lookup(const detail::Key& key, detail::Entry& e) {
    detail::LastHit& last = detail::last_hit(id_);
    const uint64_t gen = gen_.load(std::memory_order_acquire);
    if (last.id == id_ && last.gen == gen && last.key == key) {
      e = last.e;
      return true;
    }
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it == cache_.end()) return false;
    e = it->second;
    remember(last, gen, key, e);
    return true;
  }

  // The layout of the variant this thread launched last through this Function, for the
  // digest to pack by (most calls repeat it; finish() launches the buffer only where the
  // key says it is that variant).
  void expect_last(detail::Packer& pk) const {
    const detail::LastHit& last = detail::last_hit(id_);
    if (last.id == id_ && last.gen == gen_.load(std::memory_order_acquire) && last.e.packs) pk.use(last.e.tj);
  }

  // A miss: the Python runtime's variant (compiled where needed), cached for C++.
  detail::Entry resolve(const detail::Key& key, const Slot* slots, size_t n, const Options& options, int device) {
    detail::LastHit& last = detail::last_hit(id_);
    const uint64_t gen = gen_.load(std::memory_order_acquire);
    detail::Gil gil;
    detail::Ref args(to_python_args(slots, n, device));
    detail::Ref kwargs(options_kwargs(options));
    detail::Ref method(detail::check(PyObject_GetAttrString(kf_, "variant_for"), "tritonjit: "));
    detail::Ref variant(detail::check(PyObject_Call(method.p, args.p, kwargs.p), "tritonjit: kernel '" + name_ + "': "));
    detail::Entry e;
    detail::Ref cap(PyObject_GetAttrString(variant.p, "native"));
    if (cap.p == nullptr) PyErr_Clear();
    if (cap.p != nullptr && PyCapsule_IsValid(cap.p, TJ_LAUNCH_CAPSULE)) {
      auto* tj = static_cast<const tj_launch*>(PyCapsule_GetPointer(cap.p, TJ_LAUNCH_CAPSULE));
      if (tj != nullptr && tj->abi == TJ_LAUNCH_ABI) {
        e.tj = tj;
        e.keep = cap.release();
        e.packs = tj_pack_layout_ok(tj, static_cast<Py_ssize_t>(nparams_));
      }
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (cache_.size() >= kMaxVariants) cache_.clear();  // bounded; the Python cache keeps them all
    cache_.emplace(key, e);
    remember(last, gen, key, e);
    return e;
  }

  // An entry stays valid for as long as the process (its capsule is never released), so a
  // thread's copy is only a question of whether the cache still maps ``key`` to it: the
  // generation, moved on by every clear, says so.
  void remember(detail::LastHit& last, uint64_t gen, const detail::Key& key, const detail::Entry& e) const {
    last.id = id_;
    last.gen = gen;
    last.key.assign(key);
    last.e = e;
  }

  // ---- the Python bridge (GIL held) -----------------------------------------------------
  PyObject* to_python(const Slot& s, int device) const {
    switch (s.kind) {
      case Slot::Kind::None: Py_RETURN_NONE;
      case Slot::Kind::Tensor: return THPVariable_Wrap(*s.tensor);
      case Slot::Kind::Int: return PyLong_FromLongLong(s.v.i);
      case Slot::Kind::UInt: return PyLong_FromUnsignedLongLong(s.v.u);
      case Slot::Kind::Float: return PyFloat_FromDouble(s.v.d);
      case Slot::Kind::Bool: return PyBool_FromLong(static_cast<long>(s.v.i));
      case Slot::Kind::Str: return PyUnicode_FromStringAndSize(s.str.data(), static_cast<Py_ssize_t>(s.str.size()));
      case Slot::Kind::Ptr: {
        detail::Ref mod(detail::check(PyImport_ImportModule("tritonjit._native.cpp"), "tritonjit: "));
        detail::Ref dtype(detail::dtype_object(s.dtype));
        return PyObject_CallMethod(mod.p, "Pointer", "KOsi", static_cast<unsigned long long>(s.v.u), dtype.p,
                                   torch_type_.c_str(), device);
      }
    }
    Py_RETURN_NONE;
  }

  PyObject* to_python_args(const Slot* slots, size_t n, int device) const {
    detail::Ref t(detail::check(PyTuple_New(static_cast<Py_ssize_t>(n)), "tritonjit: "));
    for (size_t i = 0; i < n; i++)
      PyTuple_SET_ITEM(t.p, static_cast<Py_ssize_t>(i), detail::check(to_python(slots[i], device), "tritonjit: "));
    return t.release();
  }

  static PyObject* options_kwargs(const Options& o, uint64_t stream = 0, bool with_stream = false) {
    detail::Ref d(detail::check(PyDict_New(), "tritonjit: "));
    auto put = [&](const char* k, PyObject* v) {
      detail::Ref val(detail::check(v, "tritonjit: "));
      if (PyDict_SetItemString(d.p, k, val.p) < 0) detail::throw_python_error("tritonjit: ");
    };
    if (o.num_warps > 0) put("num_warps", PyLong_FromLong(o.num_warps));  // 0: the kernel's default
    if (o.num_stages > 0) put("num_stages", PyLong_FromLong(o.num_stages));
    for (const auto& kv : o.extra) {
      const OptionValue& v = kv.second;
      PyObject* py = v.kind == OptionValue::Kind::Int     ? PyLong_FromLongLong(v.i)
                     : v.kind == OptionValue::Kind::Float ? PyFloat_FromDouble(v.d)
                     : v.kind == OptionValue::Kind::Bool  ? PyBool_FromLong(static_cast<long>(v.i))
                                                          : PyUnicode_FromString(v.s.c_str());
      put(kv.first.c_str(), py);
    }
    if (with_stream && stream != 0) put("stream", PyLong_FromUnsignedLongLong(stream));
    return d.release();
  }

  // A backend without a C launch entry (the interpreter): KernelFunction._run.
  void launch_python(uint64_t stream, Grid grid, const Options& options, const Slot* slots, size_t n, int device) {
    detail::Gil gil;
    detail::Ref args(detail::check(PyTuple_New(static_cast<Py_ssize_t>(n + 1)), "tritonjit: "));
    PyTuple_SET_ITEM(args.p, 0, detail::check(Py_BuildValue("(III)", grid.x, grid.y, grid.z), "tritonjit: "));
    for (size_t i = 0; i < n; i++)
      PyTuple_SET_ITEM(args.p, static_cast<Py_ssize_t>(i + 1), detail::check(to_python(slots[i], device), "tritonjit: "));
    detail::Ref kwargs(options_kwargs(options, stream, true));
    detail::Ref run(detail::check(PyObject_GetAttrString(kf_, "_run"), "tritonjit: "));
    detail::Ref r(detail::check(PyObject_Call(run.p, args.p, kwargs.p), "tritonjit: kernel '" + name_ + "': "));
  }

  // ---- tuples and descriptors: the whole call through Python (correct, not fast) -----------
  template <typename... Args>
  void launch_through_python(uint64_t stream, Grid grid, const Options& options, const Args&... args) {
    check_grid(grid);
    ensure_spec();
    detail::Gil gil;
    const int device = current_device();  // for DevicePtr arguments, as launch_python's
    detail::Ref py(detail::check(PyTuple_New(static_cast<Py_ssize_t>(sizeof...(Args) + 1)), "tritonjit: "));
    PyTuple_SET_ITEM(py.p, 0, detail::check(Py_BuildValue("(III)", grid.x, grid.y, grid.z), "tritonjit: "));
    Py_ssize_t i = 1;
    (PyTuple_SET_ITEM(py.p, i++, to_python_value(args, device)), ...);
    detail::Ref kwargs(options_kwargs(options, stream, true));
    detail::Ref run(detail::check(PyObject_GetAttrString(kf_, "_run"), "tritonjit: "));
    detail::Ref r(detail::check(PyObject_Call(run.p, py.p, kwargs.p), "tritonjit: kernel '" + name_ + "': "));
  }

  // One C++ argument as a Python value: a std::tuple as a Python tuple (nested), a
  // TensorDescriptor as Triton's, anything else as digest + to_python make it. A new reference.
  template <typename T>
  PyObject* to_python_value(const T& x, int device) const {
    if constexpr (detail::is_tuple_v<T>) {
      return std::apply(
          [&](const auto&... e) {
            detail::Ref t(detail::check(PyTuple_New(static_cast<Py_ssize_t>(sizeof...(e))), "tritonjit: "));
            Py_ssize_t k = 0;
            (PyTuple_SET_ITEM(t.p, k++, to_python_value(e, device)), ...);
            return t.release();
          },
          x);
    } else if constexpr (detail::is_descriptor_v<T>) {
      return to_python_descriptor(x);
    } else {
      return detail::check(to_python(slot(x), device), "tritonjit: ");
    }
  }

  PyObject* to_python_descriptor(const TensorDescriptor& t) const {
    const std::string where = "tritonjit: kernel '" + name_ + "': TensorDescriptor: ";
    if (!t.base.defined()) throw Error(where + "its base tensor is undefined");
    detail::Ref mod(detail::check(PyImport_ImportModule("triton.tools.tensor_descriptor"), where));
    detail::Ref cls(detail::check(PyObject_GetAttrString(mod.p, "TensorDescriptor"), where));
    auto ints = [&](const std::vector<int64_t>& v) {
      detail::Ref l(detail::check(PyList_New(static_cast<Py_ssize_t>(v.size())), where));
      for (size_t k = 0; k < v.size(); k++)
        PyList_SET_ITEM(l.p, static_cast<Py_ssize_t>(k), detail::check(PyLong_FromLongLong(v[k]), where));
      return l;
    };
    detail::Ref base(detail::check(THPVariable_Wrap(t.base), where));
    detail::Ref shape = ints(t.shape), strides = ints(t.strides), block = ints(t.block_shape);
    detail::Ref args(detail::check(PyTuple_Pack(4, base.p, shape.p, strides.p, block.p), where));
    detail::Ref kwargs(detail::check(PyDict_New(), where));
    if (t.padding != "zero") {  // Triton versions before padding= take the default only
      detail::Ref pad(detail::check(PyUnicode_FromStringAndSize(t.padding.data(), static_cast<Py_ssize_t>(t.padding.size())), where));
      if (PyDict_SetItemString(kwargs.p, "padding", pad.p) < 0) detail::throw_python_error(where);
    }
    return detail::check(PyObject_Call(cls.p, args.p, kwargs.p), where);
  }

  static constexpr size_t kMaxVariants = 4096;

  PyObject* kf_;                 // the KernelFunction (never released: see ~Function)
  PyObject* cell_ = nullptr;     // registry.current_cell
  PyObject* backend_ = nullptr;  // the backend the spec below was read for
  std::string name_;
  std::vector<uint8_t> constexpr_;  // per parameter (bytes: read per argument on the hot path)
  std::vector<std::string> param_names_;
  size_t nparams_ = 0;
  uint64_t div_ = 16;
  uint64_t div_mask_ = 15;
  bool exact_ints_ = false;
  std::string torch_type_;  // the backend's torch device type ("cuda", ...)
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  bool guarded_ = false;  // torch has a device guard for device_type_ (streams without Python)
  std::shared_mutex mu_;
  std::unordered_map<detail::Key, detail::Entry, detail::KeyHash> cache_;
  const uint64_t id_ = detail::next_function_id();  // never reused: a thread's LastHit names it
  std::atomic<uint64_t> gen_{0};                      // moved on by every clear of cache_
};

}  // namespace tritonjit
