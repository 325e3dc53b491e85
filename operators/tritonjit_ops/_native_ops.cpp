// tritonjit_ops._native_ops: the C++ host path of the operators registered with torch.
//
// One boxed kernel per operator (an aten overload under enable(), or a tritonjit::
// op) is registered with torch's dispatcher from C++. A call builds a key from its
// arguments (each tensor's dtype, device, sizes and strides, those of each tensor of a
// Tensor[] argument too; the values of the non-Scalar arguments; of Scalar arguments only
// the type and whether they are 0 or 1, unless the planner asks for value-keyed scalars:
// then their values too; a factory call's (no tensor arguments: arange, zeros, ...) also
// the default dtype),
// finds the plan of that
// key, allocates the plan's outputs and launches its kernels through
// tritonjit::Function (tritonjit/function.h): on a device backend without the GIL
// and without any Python call. A key seen for the first time takes the GIL and asks
// the operator's Python planner (see _plan.py), which decides everything once; a
// planner that answers None sends the calls of that key to the operator's Python
// implementation (it validates and raises aten's errors).
//
// With the tritonjit:: ops' kernels come their autograd gates (AutogradGate): C++ kernels
// at the backend's Autograd key that call torch.library's Python autograd kernel only
// for calls autograd must record.
//
// Built on first use against the installed torch by tritonjit's torch_build, as the
// core's tensor reader is; see _native_ops.py.
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>
#include <tritonjit/function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <atomic>
#include <optional>
#include <mutex>
#include <deque>
#include <memory>
#include <new>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace {

using tritonjit::Slot;
using tritonjit::detail::Gil;
using tritonjit::detail::Ref;

// ---- the classes of _plan.py, resolved once ------------------------------------------------
PyObject *g_In, *g_Out, *g_Tmp, *g_Arg, *g_InItem, *g_Const;

std::atomic<uint64_t> g_hits{0}, g_plans{0}, g_fallback_calls{0}, g_launches{0}, g_aten_calls{0};
std::atomic<uint64_t> g_autograd_python_calls{0};  // autograd gates' calls of the Python autograd kernel

// Keys below BackendSelect: where a kernel registered at BackendSelect (enable()'s) passes a
// call on to aten's own kernel of the tensors' backend.
const c10::DispatchKeySet kAfterBackendSelect(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect);

// A Python error as the exception torch's bindings turn back into that Python error.
[[noreturn]] void rethrow_python() {
  python_error e;
  e.persist();
  throw std::move(e);
}

PyObject* checked(PyObject* o) {
  if (o == nullptr) rethrow_python();
  return o;
}

// Whether the pending Python error is one an implementation raised in aten's place
// (_fallback.final: aten would fail worse), which the caller gets instead of aten's kernel.
bool final_error() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  bool final = false;
  if (value != nullptr) {
    PyObject* mark = PyObject_GetAttrString(value, "_tritonjit_final");
    if (mark != nullptr) {
      final = PyObject_IsTrue(mark) == 1;
      Py_DECREF(mark);
    }
    PyErr_Clear();
  }
  PyErr_Restore(type, value, tb);
  return final;
}

// ---- kernels: one tritonjit::Function per KernelFunction, for the process's lifetime -------
tritonjit::Function* function_of(PyObject* kf) {
  static std::unordered_map<PyObject*, std::unique_ptr<tritonjit::Function>> fns;  // GIL guards it
  auto it = fns.find(kf);
  if (it != fns.end()) return it->second.get();
  auto f = tritonjit::Function::from_object(kf);
  tritonjit::Function* p = f.get();
  fns.emplace(kf, std::move(f));
  return p;
}

// ---- a plan in C++ --------------------------------------------------------------------------
struct Recipe {
  enum Kind : uint8_t { Lit, In, Out, Tmp, Arg, InItem } kind = Lit;
  int index = 0;
  int item = 0;  // InItem: the tensor's position in the list argument ``index``
  Slot lit;
};

struct NLaunch {
  tritonjit::Function* fn = nullptr;
  tritonjit::Grid grid;
  tritonjit::Options options;
  std::vector<Recipe> args;
};

struct NBuffer {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  std::vector<int64_t> strides;  // empty: contiguous
};

struct NPlan {
  bool fallback = false;  // the planner said None: the Python implementation runs
  bool aten = false;      // aten's own kernel of the device runs (Plan.aten)
  std::vector<NBuffer> outputs, temps;
  std::vector<NLaunch> launches;
  static constexpr int kInput = -2;  // result kInput - i: tensor argument i (Plan.result's In(i))
  std::vector<int> result, contiguous;
  std::vector<int> writes;  // tensor arguments written in place (Plan.writes): see serves_writes
  bool exclusive = false;  // Plan.exclusive: no other tensor may share a written one's storage at all
  std::vector<std::pair<int, at::ScalarType>> fits;  // Plan.fits: Scalar arguments checked per call
  std::vector<std::pair<int, at::ScalarType>> divisors;  // Plan.divisors: integer divisors checked per call
  std::vector<c10::IValue> consts;  // result kConst - c: Plan.result's Const(consts[c])
  static constexpr int kConst = -(1 << 20);
  std::deque<std::string> strings;  // storage of str literals (Slot holds views)
};

at::ScalarType dtype_of(PyObject* d) {
  if (!THPDtype_Check(d)) throw std::runtime_error("tritonjit_ops: a plan buffer's dtype is not a torch.dtype");
  return reinterpret_cast<THPDtype*>(d)->scalar_type;
}

std::vector<int64_t> ints_of(PyObject* seq) {
  Ref fast(checked(PySequence_Fast(seq, "expected a sequence of ints")));
  std::vector<int64_t> out;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
    int64_t v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast.p, i));
    if (v == -1 && PyErr_Occurred()) rethrow_python();
    out.push_back(v);
  }
  return out;
}

std::vector<NBuffer> buffers_of(PyObject* seq) {
  std::vector<NBuffer> out;
  Ref fast(checked(PySequence_Fast(seq, "expected a sequence of buffers")));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
    PyObject* b = PySequence_Fast_GET_ITEM(fast.p, i);  // Buffer(shape, dtype, strides)
    PyObject* strides = PyTuple_Size(b) > 2 ? PyTuple_GetItem(b, 2) : Py_None;
    NBuffer nb{ints_of(PyTuple_GetItem(b, 0)), dtype_of(PyTuple_GetItem(b, 1)), {}};
    if (strides != Py_None) nb.strides = ints_of(strides);
    if (!nb.strides.empty() && nb.strides.size() != nb.shape.size())
      throw std::runtime_error("tritonjit_ops: a plan buffer's strides do not match its shape");
    out.push_back(std::move(nb));
  }
  return out;
}

Recipe recipe_of(PyObject* a, NPlan& plan, const std::string& kernel) {
  Recipe r;
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(a));
  if (t == g_In || t == g_Out || t == g_Tmp || t == g_Arg) {
    r.kind = t == g_In ? Recipe::In : t == g_Out ? Recipe::Out : t == g_Tmp ? Recipe::Tmp : Recipe::Arg;
    r.index = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(a, 0)));
    return r;
  }
  if (t == g_InItem) {
    r.kind = Recipe::InItem;
    r.index = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(a, 0)));
    r.item = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(a, 1)));
    return r;
  }
  if (a == Py_None) {
    r.lit = Slot::none();
  } else if (PyBool_Check(a)) {
    r.lit = Slot::of_bool(a == Py_True);
  } else if (PyLong_Check(a)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
    if (overflow > 0)
      r.lit = Slot::of_uint(PyLong_AsUnsignedLongLong(a));
    else if (overflow == 0)
      r.lit = Slot::of_int(v);
    if (overflow < 0 || PyErr_Occurred()) rethrow_python();
  } else if (PyFloat_Check(a)) {
    r.lit = Slot::of_float(PyFloat_AS_DOUBLE(a));
  } else if (PyUnicode_Check(a)) {
    plan.strings.emplace_back(PyUnicode_AsUTF8(a));
    r.lit = Slot::of_str(plan.strings.back());
  } else {
    Ref text(PyObject_Repr(a));
    throw std::runtime_error("tritonjit_ops: a plan for kernel '" + kernel + "' passes " +
                             (text.p ? PyUnicode_AsUTF8(text.p) : "?") +
                             "; plan arguments are In/InItem/Out/Tmp/Arg references or int, float, bool, str, "
                             "None");
  }
  return r;
}

std::shared_ptr<NPlan> plan_of(PyObject* p) {
  auto plan = std::make_shared<NPlan>();
  if (p == Py_None) {
    plan->fallback = true;
    return plan;
  }
  // Plan(outputs, launches, result, temps, contiguous, aten, writes, exclusive)
  if (PyTuple_Size(p) > 5 && PyTuple_GetItem(p, 5) == Py_True) {
    plan->aten = true;
    return plan;
  }
  plan->outputs = buffers_of(PyTuple_GetItem(p, 0));
  {  // result: output indices, -1 (None), In(i): the call's tensor argument i itself (an
     // in-place op's self), kept as kInput - i, or Const(v) (an int or None), kept as kConst - c
    Ref fast(checked(PySequence_Fast(PyTuple_GetItem(p, 2), "a plan's result")));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
      PyObject* r = PySequence_Fast_GET_ITEM(fast.p, i);
      if (reinterpret_cast<PyObject*>(Py_TYPE(r)) == g_Const) {
        PyObject* v = PyTuple_GET_ITEM(r, 0);
        if (v == Py_None) {
          plan->consts.emplace_back();
        } else {
          const long long x = PyLong_AsLongLong(v);
          if (x == -1 && PyErr_Occurred()) rethrow_python();
          plan->consts.emplace_back(static_cast<int64_t>(x));
        }
        plan->result.push_back(NPlan::kConst - static_cast<int>(plan->consts.size() - 1));
        continue;
      }
      const bool is_input = reinterpret_cast<PyObject*>(Py_TYPE(r)) == g_In;
      const long v = PyLong_AsLong(is_input ? PyTuple_GET_ITEM(r, 0) : r);
      if (v == -1 && PyErr_Occurred()) rethrow_python();
      if (is_input && v < 0) throw std::runtime_error("tritonjit_ops: a plan's result In(i) with i < 0");
      plan->result.push_back(is_input ? NPlan::kInput - static_cast<int>(v) : static_cast<int>(v));
    }
  }
  plan->temps = buffers_of(PyTuple_GetItem(p, 3));
  {
    auto v = ints_of(PyTuple_GetItem(p, 4));
    plan->contiguous.assign(v.begin(), v.end());
  }
  if (PyTuple_Size(p) > 6) {  // Plan.writes
    auto v = ints_of(PyTuple_GetItem(p, 6));
    plan->writes.assign(v.begin(), v.end());
  }
  if (PyTuple_Size(p) > 7 && PyTuple_GetItem(p, 7) == Py_True) {  // Plan.exclusive
    plan->exclusive = true;
  }
  // Plan.fits and Plan.divisors: ((i, dtype), ...)
  for (const auto& [index, what, into] : {std::tuple{8, "a plan's fits", &plan->fits},
                                          std::tuple{9, "a plan's divisors", &plan->divisors}}) {
    if (PyTuple_Size(p) <= index) break;
    Ref fast(checked(PySequence_Fast(PyTuple_GetItem(p, index), what)));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
      PyObject* f = PySequence_Fast_GET_ITEM(fast.p, i);
      const long a = PyLong_AsLong(PyTuple_GetItem(f, 0));
      if (a == -1 && PyErr_Occurred()) rethrow_python();
      into->emplace_back(static_cast<int>(a), dtype_of(PyTuple_GetItem(f, 1)));
    }
  }
  Ref launches(checked(PySequence_Fast(PyTuple_GetItem(p, 1), "launches")));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(launches.p); i++) {
    PyObject* L = PySequence_Fast_GET_ITEM(launches.p, i);  // Launch(fn, grid, args, num_warps, num_stages, extra)
    NLaunch nl;
    nl.fn = function_of(PyTuple_GetItem(L, 0));
    auto g = ints_of(PyTuple_GetItem(L, 1));
    nl.grid = tritonjit::Grid{static_cast<unsigned>(g.at(0)), static_cast<unsigned>(g.at(1)),
                              static_cast<unsigned>(g.at(2))};
    PyObject* nw = PyTuple_GetItem(L, 3);
    PyObject* ns = PyTuple_GetItem(L, 4);
    nl.options.num_warps = nw == Py_None ? 0 : static_cast<int>(PyLong_AsLong(nw));
    nl.options.num_stages = ns == Py_None ? 0 : static_cast<int>(PyLong_AsLong(ns));
    Ref extra(checked(PySequence_Fast(PyTuple_GetItem(L, 5), "launch options")));
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(extra.p); k++) {
      PyObject* kv = PySequence_Fast_GET_ITEM(extra.p, k);
      const char* name = PyUnicode_AsUTF8(PyTuple_GetItem(kv, 0));
      PyObject* v = PyTuple_GetItem(kv, 1);
      if (name == nullptr) rethrow_python();
      if (PyBool_Check(v))
        nl.options.extra.emplace_back(name, tritonjit::OptionValue(v == Py_True));
      else if (PyLong_Check(v))
        nl.options.extra.emplace_back(name, tritonjit::OptionValue(static_cast<int64_t>(PyLong_AsLongLong(v))));
      else if (PyFloat_Check(v))
        nl.options.extra.emplace_back(name, tritonjit::OptionValue(PyFloat_AS_DOUBLE(v)));
      else if (PyUnicode_Check(v))
        nl.options.extra.emplace_back(name, tritonjit::OptionValue(std::string(PyUnicode_AsUTF8(v))));
      else
        throw std::runtime_error(std::string("tritonjit_ops: launch option '") + name + "' of an unsupported type");
    }
    Ref args(checked(PySequence_Fast(PyTuple_GetItem(L, 2), "launch arguments")));
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(args.p); k++)
      nl.args.push_back(recipe_of(PySequence_Fast_GET_ITEM(args.p, k), *plan, nl.fn->name()));
    plan->launches.push_back(std::move(nl));
  }
  if (PyErr_Occurred()) rethrow_python();
  return plan;
}

// Whether a plan that writes tensor arguments in place (Plan.writes) may serve this call: no
// other tensor argument (tensors of list arguments included) shares the written one's storage
// except as the very same view, and none at all for an exclusive plan (one that writes through
// an index, where even the same view is read after being written). Such a call goes to the
// Python implementation. Per call, since the key holds no addresses; _plan.serves_writes is the
// same rule in Python.
bool serves_writes(const NPlan& plan, const c10::IValue* args, size_t nargs) {
  for (int w : plan.writes) {
    if (w < 0 || static_cast<size_t>(w) >= nargs || !args[w].isTensor()) return false;
    const at::Tensor& o = args[w].toTensor();
    if (!o.defined() || !o.has_storage() || o.numel() == 0) continue;
    const c10::StorageImpl* s = o.storage().unsafeGetStorageImpl();
    auto shares = [&](const at::Tensor& t) -> bool {  // in a way the plan cannot serve
      if (!t.defined() || !t.has_storage() || t.numel() == 0 || t.storage().unsafeGetStorageImpl() != s) return false;
      return plan.exclusive || t.data_ptr() != o.data_ptr() || t.sizes() != o.sizes() || t.strides() != o.strides() ||
             t.scalar_type() != o.scalar_type();
    };
    for (size_t i = 0; i < nargs; i++) {
      if (static_cast<int>(i) == w) continue;
      if (args[i].isTensor()) {
        if (shares(args[i].toTensor())) return false;
      } else if (args[i].isList()) {
        for (const c10::IValue& e : args[i].toListRef())
          if (e.isTensor() && shares(e.toTensor())) return false;
      }
    }
  }
  return true;
}

// Whether aten converts the Scalar ``v`` to ``dt`` without its overflow error (_plan.scalar_fits,
// the same rule): a bool dtype takes anything; inf and NaN pass into floating dtypes only;
// uint8 takes the ints -255..255 and the doubles 0..255. ``v`` is a bool, int or double (the
// key admits no other Scalar).
bool scalar_fits(const c10::IValue& v, at::ScalarType dt) {
  if (dt == at::kBool || v.isBool()) return true;
  if (at::isFloatingType(dt)) {
    const double x = v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
    if (!std::isfinite(x)) return true;
    const double mx = dt == at::kHalf       ? 65504.0
                      : dt == at::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::max())
                      : dt == at::kFloat    ? static_cast<double>(std::numeric_limits<float>::max())
                                            : std::numeric_limits<double>::max();
    return std::fabs(x) <= mx;
  }
  int64_t lo = 0, hi = 0;
  switch (dt) {
    case at::kByte: lo = -255, hi = 255; break;  // negatives wrap, as c10::overflows allows
    case at::kChar: lo = -128, hi = 127; break;
    case at::kShort: lo = -32768, hi = 32767; break;
    case at::kInt: lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max(); break;
    default: lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  }
  if (v.isDouble()) {  // a float into uint8: from 0 (c10::overflows checks floats against [lowest, max])
    const double x = v.toDouble();
    return std::isfinite(x) && x >= (dt == at::kByte ? 0.0 : static_cast<double>(lo)) && x <= static_cast<double>(hi);
  }
  const int64_t x = v.toInt();
  return x >= lo && x <= hi;
}

// Whether the integer ``v`` is 0 once converted to the integer dtype ``dt``, wrapping as aten
// converts a Scalar (_plan.zero_divisor, the same rule): 65536 in int16.
bool zero_divisor(const c10::IValue& v, at::ScalarType dt) {
  const int64_t x = v.isBool() ? static_cast<int64_t>(v.toBool()) : v.isInt() ? v.toInt() : 1;
  const int bits = static_cast<int>(c10::elementSize(dt)) * 8;
  return bits >= 64 ? x == 0 : (static_cast<uint64_t>(x) & ((uint64_t{1} << bits) - 1)) == 0;
}

// A Scalar argument's value: the Scalar itself, or a wrapped number's (``x // 3`` passes 3 as a
// 0-dim CPU tensor); None where it is neither, or not a bool, int or double.
c10::IValue scalar_value(const c10::IValue& v) {
  if (v.isBool() || v.isInt() || v.isDouble()) return v;
  if (!v.isTensor()) return c10::IValue();
  const at::Tensor& t = v.toTensor();
  if (!t.defined() || !t.is_cpu() || t.numel() != 1) return c10::IValue();
  switch (t.scalar_type()) {  // read in place (a plan's Arg() slots read them so): item() would dispatch
    case at::kLong: return c10::IValue(*t.const_data_ptr<int64_t>());
    case at::kInt: return c10::IValue(static_cast<int64_t>(*t.const_data_ptr<int32_t>()));
    case at::kDouble: return c10::IValue(*t.const_data_ptr<double>());
    case at::kFloat: return c10::IValue(static_cast<double>(*t.const_data_ptr<float>()));
    case at::kBool: return c10::IValue(*t.const_data_ptr<bool>());
    default: break;
  }
  c10::IValue item(t.item());
  return item.isBool() || item.isInt() || item.isDouble() ? item : c10::IValue();
}

// Whether a plan may serve this call's values: its in-place writes (serves_writes), its
// Scalar arguments' ranges (Plan.fits) and its integer divisors (Plan.divisors). Per call:
// the key holds neither addresses nor values.
bool serves(const NPlan& plan, const c10::IValue* args, size_t nargs) {
  for (const auto& [i, dt] : plan.fits) {
    if (i < 0 || static_cast<size_t>(i) >= nargs) return false;
    const c10::IValue v = scalar_value(args[i]);
    if (v.isNone() || !scalar_fits(v, dt)) return false;
  }
  for (const auto& [i, dt] : plan.divisors) {
    if (i < 0 || static_cast<size_t>(i) >= nargs) return false;
    const c10::IValue v = scalar_value(args[i]);
    if (v.isNone() || zero_divisor(v, dt)) return false;
  }
  return serves_writes(plan, args, nargs);
}

// ---- plan caches: one per (operator, planner), kept across enable()/disable() ----------------
struct PlanCache {
  static constexpr size_t kMax = 4096;  // bounded: a model has a few hundred call shapes per op
  std::shared_mutex mu;
  std::unordered_map<tritonjit::detail::Key, std::shared_ptr<NPlan>, tritonjit::detail::KeyHash> plans;
};

// ``name`` ("add.Tensor": overload after the dot) of namespace ``ns`` as an operator name
c10::OperatorName operator_name(const char* ns, const char* name) {
  std::string base(name), overload;
  const auto dot = base.find('.');
  if (dot != std::string::npos) {
    overload = base.substr(dot + 1);
    base = base.substr(0, dot);
  }
  return c10::OperatorName(std::string(ns) + "::" + base, overload);
}

// "ns::name" or "ns::name.overload": how the plan caches name their operator
std::string qualified(const c10::OperatorName& op) {
  return op.name + (op.overload_name.empty() ? "" : "." + op.overload_name);
}

// "op@planner" -> its cache (op: qualified()); an entry lives as long as the process
// (clear_plans() empties it)
std::mutex g_caches_mu;
std::unordered_map<std::string, std::shared_ptr<PlanCache>> g_caches;

std::shared_ptr<PlanCache> cache_for(const std::string& op, PyObject* planner) {
  std::lock_guard<std::mutex> lock(g_caches_mu);
  auto& c = g_caches[op + "@" + std::to_string(reinterpret_cast<uintptr_t>(planner))];
  if (!c) c = std::make_shared<PlanCache>();
  return c;
}

// ---- the operator kernel --------------------------------------------------------------------
enum class ArgKind : uint8_t { Other, Tensor, Scalar, ScalarType };

// An operator's arguments as torch's own Python kernels receive them (positional ones, then
// keyword-only ones as keywords; a ScalarType as a torch.dtype), and a Python result back on
// the stack: shared by the operator kernels and the autograd gates.
struct PySignature {
  explicit PySignature(const c10::FunctionSchema& schema) {
    for (const auto& a : schema.arguments()) {
      kwarg_only.push_back(a.kwarg_only());
      names.push_back(a.name());
      auto t = a.real_type();  // ScalarType, not the int it travels as
      if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
      ArgKind k = ArgKind::Other;
      if (t->kind() == c10::TypeKind::NumberType) k = ArgKind::Scalar;
      if (t->kind() == c10::TypeKind::ScalarTypeType) k = ArgKind::ScalarType;
      if (t->kind() == c10::TypeKind::TensorType) k = ArgKind::Tensor;
      kinds.push_back(k);
    }
    nargs = schema.arguments().size();
    nreturns = schema.returns().size();
  }

  // (args, kwargs) of the call whose nargs arguments start at ``args``; ``first``, where given,
  // leads the positional ones (an autograd kernel's DispatchKeySet).
  std::pair<Ref, Ref> python_args(const c10::IValue* args, PyObject* first = nullptr) const {
    size_t npos = 0;
    while (npos < nargs && !kwarg_only[npos]) npos++;
    const Py_ssize_t lead = first != nullptr ? 1 : 0;
    Ref pos(checked(PyTuple_New(static_cast<Py_ssize_t>(npos) + lead)));
    Ref kw(checked(PyDict_New()));
    if (first != nullptr) {
      Py_INCREF(first);
      PyTuple_SET_ITEM(pos.p, 0, first);
    }
    for (size_t i = 0; i < nargs; i++) {
      PyObject* o;
      if (kinds[i] == ArgKind::ScalarType && args[i].isInt()) {
        o = reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<at::ScalarType>(args[i].toInt())));
        Py_INCREF(o);
      } else {
        o = torch::jit::toPyObject(args[i]).release().ptr();
      }
      if (i < npos) {
        PyTuple_SET_ITEM(pos.p, static_cast<Py_ssize_t>(i) + lead, o);
      } else {
        Ref val(o);
        if (PyDict_SetItemString(kw.p, names[i].c_str(), o) < 0) rethrow_python();
      }
    }
    return {std::move(pos), std::move(kw)};
  }

  // The call's arguments replaced on the stack by the Python result ``r`` (a tuple where the
  // operator returns several values).
  void push_result(const c10::OperatorHandle& op, PyObject* r, torch::jit::Stack* stack) const {
    torch::jit::drop(*stack, nargs);
    const auto& returns = op.schema().returns();
    if (nreturns == 1) {
      stack->emplace_back(torch::jit::toIValue(r, returns[0].type()));
    } else {
      for (size_t k = 0; k < nreturns; k++)
        stack->emplace_back(torch::jit::toIValue(PyTuple_GetItem(r, static_cast<Py_ssize_t>(k)), returns[k].type()));
    }
  }

  std::vector<bool> kwarg_only;
  std::vector<std::string> names;
  std::vector<ArgKind> kinds;
  size_t nargs = 0, nreturns = 0;
};

class OpKernel final : public c10::OperatorKernel {
 public:
  // redispatch: registered at BackendSelect (enable() over aten), so that calls it does not
  // serve (another device type; a plan that measured aten faster; a Python implementation
  // that cannot take the call) go on to aten's own kernel, as in eager. device_type: the
  // active backend's, whose tensors the plans are for.
  // keying (keying_of): bit 0, the planner's ``value_keyed_scalars`` (_plan.value_keyed): the
  // key holds the values of Scalar arguments, so its plans may bake them in (arange's size);
  // bit 1, its ``tf32_keyed`` (_plan.tf32_keyed): the key holds torch's allow_tf32 flag for
  // matmuls, which its plans bake in (an fp32 mm's input precision).
  OpKernel(const c10::FunctionSchema& schema, PyObject* planner, PyObject* impl, bool redispatch,
           c10::DeviceType device_type, unsigned keying)
      : planner_(planner), impl_(impl), sig_(schema), nargs_(sig_.nargs), redispatch_(redispatch),
        value_keyed_((keying & 1) != 0), tf32_keyed_((keying & 2) != 0), list_limit_((keying >> 8) & 0xff),
        device_type_(device_type) {
    Py_XINCREF(planner_);
    Py_INCREF(impl_);
    name_ = qualified(schema.operator_name());
    if (planner_ != nullptr) cache_ = cache_for(name_, planner_);
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    c10::IValue* args = stack->data() + (stack->size() - nargs_);
    if (redispatch_) {
      const int where = backend_of(args);
      if (where == kNoTensors) return factory(op, ks, stack);
      if (where == kOtherBackend) return to_aten(op, ks, stack);
      if (list_limit_ != 0 && longer_list(args)) return to_aten(op, ks, stack);  // _plan.list_limit
    }
    DevRef dev;
    if (std::shared_ptr<NPlan> plan = plan_for(args, dev)) {
      if (plan->aten && redispatch_) {
        g_hits++;
        return to_aten(op, ks, stack);
      }
      if (!plan->fallback && !plan->aten && serves(*plan, args, nargs_)) {
        g_hits++;
        return execute(*plan, args, dev, stack);
      }
    }
    // a lazily conjugated or negated view (autograd's complex mul backward, ``x.conj().imag``):
    // no key describes it and no tritonjit kernel reads it; aten's kernel resolves it, without
    // the Python implementation's call to be refused first
    if (redispatch_ && lazy_view(args)) return to_aten(op, ks, stack);
    g_fallback_calls++;
    if (!call_python(op, stack)) to_aten(op, ks, stack);  // the implementation could not: aten's, as eager
  }

 private:
  static constexpr int kOnBackend = 1, kOtherBackend = 0, kNoTensors = -1;

  // Whether a tensor argument (in a list too) is a conjugate or negative view (off the hot path:
  // asked only of calls without a plan).
  bool lazy_view(const c10::IValue* args) const {
    auto lazy = [](const at::Tensor& t) { return t.defined() && (t.is_conj() || t.is_neg()); };
    for (size_t i = 0; i < nargs_; i++) {
      if (args[i].isTensor() && lazy(args[i].toTensor())) return true;
      if (args[i].isTensorList())
        for (const c10::IValue& v : args[i].toListRef())
          if (lazy(v.toTensor())) return true;
    }
    return false;
  }

  // Whether a tensor-list argument holds more than list_limit_ tensors.
  bool longer_list(const c10::IValue* args) const {
    for (size_t i = 0; i < nargs_; i++)
      if (args[i].isTensorList() && args[i].toListRef().size() > list_limit_) return true;
    return false;
  }

  // The tensor whose device the outputs take: tensor argument ``arg``, or (item >= 0) tensor
  // ``item`` of the Tensor[] argument ``arg`` (cat's inputs, where no tensor argument exists).
  // A factory call (no tensors) takes its device from its ``device`` argument (``fixed``).
  struct DevRef {
    int arg = -1, item = -1;
    bool scalar = false;  // a 0-dim CPU tensor (a scalar): a later tensor on a device replaces it
    std::optional<at::Device> fixed;
    at::Device device(const c10::IValue* args) const {
      if (fixed) return *fixed;
      return item < 0 ? args[arg].toTensor().device() : args[arg].toListRef()[item].toTensor().device();
    }
  };

  // Whether the call's tensors (lists of tensors included) are the active backend's (0-dim
  // CPU tensors are scalars); kNoTensors for a factory call (arange, ...).
  int backend_of(const c10::IValue* args) const {
    bool any = false, seen = false;
    auto visit = [&](const at::Tensor& t) -> bool {
      if (!t.defined()) return true;
      seen = true;
      const c10::DeviceType dt = t.device().type();
      if (dt == device_type_) {
        any = true;
      } else if (!(dt == c10::DeviceType::CPU && t.dim() == 0)) {
        return false;
      }
      return true;
    };
    for (size_t i = 0; i < nargs_; i++) {
      if (args[i].isTensor()) {
        if (!visit(args[i].toTensor())) return kOtherBackend;
      } else if (args[i].isTensorList()) {
        for (const at::Tensor& t : args[i].toTensorList().vec())
          if (!visit(t)) return kOtherBackend;
      }
    }
    if (!seen) return kNoTensors;
    return any ? kOnBackend : kOtherBackend;
  }

  // A call without tensor arguments (a factory: arange, ...): ours where its device is the
  // active backend's (strided, not pinned): its plan, whose buffers are allocated on that
  // device (the Python implementation where the planner said None; aten's kernel where that
  // refuses), else aten's kernel of the device its dtype/layout/device arguments name, as
  // aten's own BackendSelect kernel chooses it.
  void factory(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    const c10::IValue* args = stack->data() + (stack->size() - nargs_);
    std::optional<at::ScalarType> dtype;
    std::optional<at::Layout> layout;
    std::optional<at::Device> device;
    bool pinned = false;
    for (size_t i = 0; i < nargs_; i++) {
      if (args[i].isNone()) continue;
      if (sig_.names[i] == "dtype" && args[i].isInt()) dtype = static_cast<at::ScalarType>(args[i].toInt());
      if (sig_.names[i] == "layout" && args[i].isInt()) layout = static_cast<at::Layout>(args[i].toInt());
      if (sig_.names[i] == "device" && args[i].isDevice()) device = args[i].toDevice();
      if (sig_.names[i] == "pin_memory" && args[i].isBool()) pinned = args[i].toBool();
    }
    const c10::DeviceType dt = device ? device->type() : c10::DeviceType::CPU;
    if (dt == device_type_ && (!layout || *layout == at::kStrided)) {
      tritonjit::detail::Key key;
      DevRef dev;
      dev.fixed = device ? *device : at::Device(c10::DeviceType::CPU);
      if (planner_ != nullptr && !pinned && build_key(args, key, dev, true)) {
        std::shared_ptr<NPlan> plan = find(key, args);
        if (!plan->fallback && !plan->aten && serves(*plan, args, nargs_)) {
          g_hits++;
          return execute(*plan, args, dev, stack);
        }
      }
      g_fallback_calls++;
      if (call_python(op, stack)) return;
    }
    g_aten_calls++;
    const c10::DispatchKey key = c10::computeDispatchKey(dtype, layout, device);
    op.redispatchBoxed((ks & kAfterBackendSelect) | c10::DispatchKeySet(key), stack);
  }

  void to_aten(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) const {
    g_aten_calls++;
    op.redispatchBoxed(ks & kAfterBackendSelect, stack);
  }

  // Key words of the call; false where a call cannot have a plan (an argument kind the
  // key does not describe, a lazily negated or conjugated view, a non-strided layout, a key
  // longer than kMaxWords).
  // factory: a call without tensors (dev.fixed holds its device). The default dtype is a
  // word of every key.
  bool build_key(const c10::IValue* args, tritonjit::detail::Key& key, DevRef& dev, bool factory = false) const {
    // a tensor's words: its dtype, device and dim, then its sizes and strides
    auto push_tensor = [&](const at::Tensor& t, int arg, int item) -> bool {
      if (t.layout() != at::kStrided || t.is_neg() || t.is_conj()) return false;
      if (2 * t.dim() + key.n + 9 > tritonjit::detail::kMaxWords) return false;
      const auto d = t.device();
      const bool cpu_scalar = d.is_cpu() && t.dim() == 0;
      if (dev.arg < 0 || (dev.scalar && !cpu_scalar)) dev = DevRef{arg, item, cpu_scalar};
      key.push(2 | static_cast<uint64_t>(static_cast<uint8_t>(t.scalar_type())) << 8 |
               static_cast<uint64_t>(static_cast<uint8_t>(d.type())) << 16 |
               static_cast<uint64_t>(static_cast<uint8_t>(d.index() + 1)) << 24 |
               static_cast<uint64_t>(t.dim()) << 32 | static_cast<uint64_t>(t.unsafeGetTensorImpl()->is_wrapped_number()) << 48);
      for (int64_t k = 0; k < t.dim(); k++) {
        key.push(static_cast<uint64_t>(t.sizes()[k]));
        key.push(static_cast<uint64_t>(t.strides()[k]));
      }
      return true;
    };
    for (size_t i = 0; i < nargs_; i++) {
      const c10::IValue& v = args[i];
      if (v.isTensor()) {
        const at::Tensor& t = v.toTensor();
        if (!t.defined()) {
          key.push(1);
          continue;
        }
        if (!push_tensor(t, static_cast<int>(i), -1)) return false;
      } else if (v.isTensorList()) {  // cat's inputs: each tensor as a tensor argument (plans use InItem)
        const c10::ArrayRef<c10::IValue> l = v.toListRef();
        if (l.size() + key.n + 8 > static_cast<size_t>(tritonjit::detail::kMaxWords)) return false;
        key.push(15 | static_cast<uint64_t>(l.size()) << 8);
        for (size_t k = 0; k < l.size(); k++) {
          const at::Tensor& t = l[k].toTensor();
          // undefined, or a 0-dim CPU tensor (a scalar only as a tensor argument): the Python implementation
          if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return false;
          if (!push_tensor(t, static_cast<int>(i), static_cast<int>(k))) return false;
        }
      } else if (v.isNone()) {
        key.push(3);
      } else if (sig_.kinds[i] == ArgKind::Scalar) {
        // by type, and whether it is 0 or 1: plans pass the value at run time (Arg), and may
        // count on those two (an addmm's beta == 0 ignores the bias, alpha == 1 needs no scaling)
        if (!(v.isBool() || v.isInt() || v.isDouble())) return false;
        if (value_keyed_) {  // the planner's choice (_plan.value_keyed): the value itself
          if (v.isDouble()) {
            const double x = v.toDouble();
            uint64_t b;
            std::memcpy(&b, &x, 8);
            key.push(7 | 2 << 8);
            key.push(b);
          } else {
            key.push(7 | static_cast<uint64_t>(v.isBool() ? 0 : 1) << 8);
            key.push(v.isBool() ? static_cast<uint64_t>(v.toBool()) : static_cast<uint64_t>(v.toInt()));
          }
          continue;
        }
        const double d = v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : v.toBool();
        key.push((v.isBool() ? 4 : v.isInt() ? 5 : 6) | static_cast<uint64_t>(d == 0.0) << 8 |
                 static_cast<uint64_t>(d == 1.0) << 9);
      } else if (v.isInt()) {
        key.push(8);
        key.push(static_cast<uint64_t>(v.toInt()));
      } else if (v.isDouble()) {
        key.push(9);
        const double d = v.toDouble();
        uint64_t b;
        std::memcpy(&b, &d, 8);
        key.push(b);
      } else if (v.isBool()) {
        key.push(10 | static_cast<uint64_t>(v.toBool()) << 8);
      } else if (v.isString()) {
        const auto& s = v.toStringRef();
        key.push(11 | static_cast<uint64_t>(s.size()) << 8);
        key.push(tritonjit::detail::hash_bytes(s));
      } else if (v.isIntList()) {
        const auto l = v.toIntList();
        if (l.size() + key.n + 8 > static_cast<size_t>(tritonjit::detail::kMaxWords)) return false;
        key.push(12 | static_cast<uint64_t>(l.size()) << 8);
        for (int64_t x : l) key.push(static_cast<uint64_t>(x));
      } else if (v.isBoolList()) {  // a backward's output_mask
        const auto l = v.toBoolList();
        if (l.size() > 32) return false;
        uint64_t bits = 0;
        for (size_t k = 0; k < l.size(); k++) bits |= static_cast<uint64_t>(l.get(k)) << k;
        key.push(14 | static_cast<uint64_t>(l.size()) << 8 | bits << 16);
      } else if (v.isDevice()) {
        key.push(13 | static_cast<uint64_t>(static_cast<uint8_t>(v.toDevice().type())) << 8 |
                 static_cast<uint64_t>(static_cast<uint8_t>(v.toDevice().index() + 1)) << 16);
      } else if (v.isList()) {  // Tensor?[] (index's indices): per item None, or its words as a tensor's
        const c10::ArrayRef<c10::IValue> l = v.toListRef();
        if (l.size() + key.n + 8 > static_cast<size_t>(tritonjit::detail::kMaxWords)) return false;
        key.push(17 | static_cast<uint64_t>(l.size()) << 8);
        for (size_t k = 0; k < l.size(); k++) {
          // None, or an undefined tensor: what Python's indexing (x[:, idx]) passes for a sliced
          // dim, and what the planner sees as None
          if (l[k].isNone() || (l[k].isTensor() && !l[k].toTensor().defined())) {
            key.push(3);
          } else if (!l[k].isTensor()) {
            return false;
          } else if (!push_tensor(l[k].toTensor(), static_cast<int>(i), static_cast<int>(k))) {
            return false;
          }
        }
      } else {
        return false;  // generators, ...: the Python implementation
      }
    }
    // the default dtype: a factory's dtype=None means it, and an op's result type may (int
    // tensor / int, int tensor * float: float32, or float64 after torch.set_default_dtype);
    // deterministic mode: the ops that write through an index plan aten's kernel then
    if (key.n + 2 > tritonjit::detail::kMaxWords) return false;
    key.push(16 | static_cast<uint64_t>(static_cast<uint8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())))
                      << 8 | static_cast<uint64_t>(at::globalContext().deterministicAlgorithms()) << 16);
    if (tf32_keyed_) key.push(17 | static_cast<uint64_t>(at::globalContext().allowTF32CuBLAS()) << 8);
    if (factory) return dev.fixed.has_value();
    return dev.arg >= 0;
  }

  std::shared_ptr<NPlan> find(const tritonjit::detail::Key& key, const c10::IValue* args) {
    {
      std::shared_lock<std::shared_mutex> lock(cache_->mu);
      auto it = cache_->plans.find(key);
      if (it != cache_->plans.end()) return it->second;
    }
    Gil gil;
    auto [pargs, kwargs] = sig_.python_args(args);
    Ref p(checked(PyObject_Call(planner_, pargs.p, kwargs.p)));
    std::shared_ptr<NPlan> plan = plan_of(p.p);
    g_plans++;
    std::unique_lock<std::shared_mutex> lock(cache_->mu);
    if (cache_->plans.size() >= PlanCache::kMax) cache_->plans.clear();
    cache_->plans.emplace(key, plan);
    return plan;
  }

  static Slot scalar_slot(const c10::IValue& v) {  // a 0-dim CPU tensor: its value, as .item() gives it
    if (v.isTensor() && v.toTensor().defined() && !v.toTensor().is_cpu())
      throw std::runtime_error("tritonjit_ops: Arg() of a device tensor");
    const c10::IValue s = scalar_value(v);
    if (s.isBool()) return Slot::of_bool(s.toBool());
    if (s.isInt()) return Slot::of_int(s.toInt());
    if (s.isDouble()) return Slot::of_float(s.toDouble());
    throw std::runtime_error("tritonjit_ops: Arg() of an argument that is no scalar");
  }

  // The plan's launches for the call whose arguments start at ``args``; its results on the
  // stack in place of the arguments.
  void execute(const NPlan& plan, const c10::IValue* args, const DevRef& dev, torch::jit::Stack* stack) {
    Results results;
    run(plan, args, dev, results);
    torch::jit::drop(*stack, nargs_);
    for (auto& r : results) stack->emplace_back(std::move(r));
  }

 public:
  using Results = c10::SmallVector<c10::IValue, 4>;

  // A call served by its plan (the direct entries' path: no dispatcher, no stack): its
  // results in ``results``; false, with nothing run, where the call has no plan (a key the
  // C++ path does not describe, a planner that said None or gave the call to aten).
  bool serve(const c10::IValue* args, Results& results) {
    DevRef dev;
    std::shared_ptr<NPlan> plan = plan_for(args, dev);
    if (plan == nullptr || plan->fallback || plan->aten || !serves(*plan, args, nargs_)) return false;
    g_hits++;
    run(*plan, args, dev, results);
    return true;
  }

 private:
  // The call's plan (made now where its key is new; ``dev`` set), or null where the call can
  // have none: no planner, or a key the C++ path does not describe (see build_key).
  std::shared_ptr<NPlan> plan_for(const c10::IValue* args, DevRef& dev) {
    if (planner_ == nullptr) return nullptr;
    tritonjit::detail::Key key;
    if (!build_key(args, key, dev)) return nullptr;
    return find(key, args);
  }

  void run(const NPlan& plan, const c10::IValue* args, const DevRef& dev, Results& results) {
    const at::TensorOptions opts = at::TensorOptions().device(dev.device(args));
    c10::SmallVector<at::Tensor, 4> contig;  // inputs made contiguous (plan.contiguous); no heap on the hot path
    for (int i : plan.contiguous) {
      contig.push_back(args[i].toTensor().contiguous());
    }
    auto input = [&](int i) -> const at::Tensor& {
      for (size_t k = 0; k < plan.contiguous.size(); k++)
        if (plan.contiguous[k] == i) return contig[k];
      return args[i].toTensor();
    };
    // Outputs and temporaries from aten's empty kernel of the device's backend, reached by
    // redispatch: at::empty's full dispatcher call (the key computed from the options, the
    // BackendSelect kernel, the profiler's record) costs more than the allocation itself, on
    // every call of a small op. That kernel sets the device guard, as at::empty's does.
    const at::Device device = opts.device();
    const c10::DispatchKeySet alloc_ks(c10::computeDispatchKey(std::nullopt, at::kStrided, device));
    auto empty = [&](const NBuffer& b) {
      if (!b.strides.empty())
        return at::_ops::empty_strided::redispatch(alloc_ks, c10::fromIntArrayRefUnchecked(b.shape),
                                                   c10::fromIntArrayRefUnchecked(b.strides), b.dtype, at::kStrided,
                                                   device, std::nullopt);
      return at::_ops::empty_memory_format::redispatch(alloc_ks, c10::fromIntArrayRefUnchecked(b.shape), b.dtype,
                                                        at::kStrided, device, std::nullopt, std::nullopt);
    };
    c10::SmallVector<at::Tensor, 8> outs, tmps;
    for (const auto& b : plan.outputs) outs.push_back(empty(b));
    for (const auto& b : plan.temps) tmps.push_back(empty(b));
    // raw storage: each launch writes the Slots it passes (64 default-constructed Slots
    // would be some 500 stores per call of an op)
    static_assert(std::is_trivially_copyable_v<Slot> && std::is_trivially_destructible_v<Slot>);
    alignas(Slot) unsigned char slot_bytes[sizeof(Slot) * 64];
    Slot* const slots = reinterpret_cast<Slot*>(slot_bytes);
    for (const NLaunch& L : plan.launches) {
      const size_t n = L.args.size();
      if (n > 64) throw std::runtime_error("tritonjit_ops: too many kernel arguments");
      for (size_t k = 0; k < n; k++) {
        const Recipe& r = L.args[k];
        Slot* const at = &slots[k];
        switch (r.kind) {
          case Recipe::Lit: new (at) Slot(r.lit); break;
          case Recipe::In: new (at) Slot(Slot::of(input(r.index))); break;
          case Recipe::InItem: {
            const c10::ArrayRef<c10::IValue> l = args[r.index].toListRef();  // its length is in the key
            if (static_cast<size_t>(r.item) >= l.size()) throw std::runtime_error("tritonjit_ops: InItem out of range");
            new (at) Slot(Slot::of(l[r.item].toTensor()));
            break;
          }
          case Recipe::Out: new (at) Slot(Slot::of(outs[r.index])); break;
          case Recipe::Tmp: new (at) Slot(Slot::of(tmps[r.index])); break;
          case Recipe::Arg: new (at) Slot(scalar_slot(args[r.index])); break;
        }
      }
      L.fn->launch(0, L.grid, L.options, slots, n);
      g_launches++;
    }
    // -1: an output the call does not need (an undefined tensor); kInput - i: argument i itself
    // (taken before the arguments leave the stack); kConst - c: a constant (an int, None)
    const size_t nres = plan.result.size();
    results.resize(nres);
    for (size_t k = 0; k < nres; k++) {
      const int r = plan.result[k];
      if (r >= 0) {
        results[k] = std::move(outs[r]);
      } else if (r <= NPlan::kConst) {
        results[k] = plan.consts.at(static_cast<size_t>(NPlan::kConst - r));
      } else if (r <= NPlan::kInput) {
        if (static_cast<size_t>(NPlan::kInput - r) >= nargs_)
          throw std::runtime_error("tritonjit_ops: a plan's result In(i) past the call's arguments");
        results[k] = args[NPlan::kInput - r].toTensor();
      } else {
        results[k] = at::Tensor();
      }
    }
  }

  // The Python implementation. False (the stack untouched) where it raised and the call can
  // go on to aten's own kernel instead (redispatch_): a dtype or layout it does not take,
  // or bad input, whose error is then aten's own, as in eager.
  bool call_python(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    Gil gil;
    c10::IValue* args = stack->data() + (stack->size() - nargs_);
    auto [pargs, kwargs] = sig_.python_args(args);
    PyObject* result = PyObject_Call(impl_, pargs.p, kwargs.p);
    if (result == nullptr && redispatch_ && !final_error()) {
      PyErr_Clear();
      return false;
    }
    Ref r(checked(result));
    sig_.push_result(op, r.p, stack);
    return true;
  }

  PyObject* planner_;  // None-able: no planner, every call is the Python implementation's
  PyObject* impl_;
  std::string name_;
  PySignature sig_;
  size_t nargs_ = 0;  // sig_.nargs
  std::shared_ptr<PlanCache> cache_;
  bool redispatch_ = false;
  bool value_keyed_ = false;
  bool tf32_keyed_ = false;
  size_t list_limit_ = 0;  // _plan.list_limit's n; 0: none
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
};

// Whether autograd has work for a call with tensor ``t``: grad mode on and ``t`` requiring
// grad, or a forward-mode gradient on it (the autograd gates and the direct entries ask).
bool autograd_work(const at::Tensor& t, bool grad_mode) {
  return t.defined() && ((grad_mode && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
}

// ---- the autograd gate ----------------------------------------------------------------------
// torch.library.register_autograd puts a Python kernel at the Autograd alias key, which every
// call of the op runs (~3 us), grad or not. A gate sits at the backend's own Autograd key (which
// the dispatcher prefers to the alias) and runs that Python kernel only where autograd has work:
// grad mode on and a tensor argument requiring grad, or a tensor with a forward-mode gradient
// (whatever that Python kernel does with it, it still does). Any other call goes below autograd
// without Python, as the Python kernel itself sends it (torch/_library/autograd.py,
// forward_no_grad): under AutoDispatchBelowAutograd, to the keys after autograd.
class AutogradGate final : public c10::OperatorKernel {
 public:
  AutogradGate(const c10::FunctionSchema& schema, PyObject* kernel) : sig_(schema), kernel_(kernel) {
    Py_INCREF(kernel_);  // kept for the process's lifetime, as the operator kernels' (no GIL at teardown)
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    const c10::IValue* args = stack->data() + (stack->size() - sig_.nargs);
    if (needs_autograd(args)) return call_python(op, ks, stack);
    at::AutoDispatchBelowAutograd guard;
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
  }

 private:
  // A superset of the Python kernel's own test (grad mode and a positional tensor requiring
  // grad): where this says no, that kernel would have taken its no-grad path too.
  bool needs_autograd(const c10::IValue* args) const {
    const bool grad_mode = at::GradMode::is_enabled();
    for (size_t i = 0; i < sig_.nargs; i++) {
      const c10::IValue& v = args[i];
      if (v.isTensor()) {
        if (autograd_work(v.toTensor(), grad_mode)) return true;
      } else if (v.isList()) {  // Tensor[] and Tensor?[]
        for (const c10::IValue& e : v.toListRef())
          if (e.isTensor() && autograd_work(e.toTensor(), grad_mode)) return true;
      }
    }
    return false;
  }

  // kernel(keyset, *args, **keyword_only_args), as torch calls a with_keyset Python kernel.
  void call_python(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    g_autograd_python_calls++;
    Gil gil;
    const c10::IValue* args = stack->data() + (stack->size() - sig_.nargs);
    Ref keyset(pybind11::cast(ks).release().ptr());  // torch binds c10::DispatchKeySet with pybind11
    auto [pargs, kwargs] = sig_.python_args(args, keyset.p);
    Ref r(checked(PyObject_Call(kernel_, pargs.p, kwargs.p)));
    sig_.push_result(op, r.p, stack);
  }

  PySignature sig_;
  PyObject* kernel_;
};

// ---- direct entries -------------------------------------------------------------------------
// tritonjit_ops.add(x, y) and the other direct entries, as C callables: a call whose arguments
// bind to one of the op's overloads (by the Python entry's parameter names and defaults) and
// whose key has a plan runs that plan here, the torch.ops kernels' plan, from the same cache:
// no dispatcher, no boxing through torch's Python binding, no Python frame. Everything else
// (autograd work, a tensor subclass, a torch function or dispatch mode, functorch or
// functionalization, a tensor of another device, out=, a call shape without a plan) goes to
// the Python entry, unchanged, which validates and raises the errors.
//
// The same callable serves the torch.ops.tritonjit packets (``packet``): there the fallback is
// torch's own call of the packet (overload resolution, the dispatcher), the names and defaults
// are the schema's, arguments bind only as torch's resolver would bind them, and whatever the
// dispatcher would add to the call also sends it there: an active profiler or other
// RecordFunction callbacks, the JIT tracer, and the keys and modes above. What the dispatcher
// would run for a plain call is this op's own C++ kernel, whose plan runs here.
enum class PyKind : uint8_t { Tensor, Scalar, Int, Float, Bool, IntList, ScalarType, Str, Unsupported };

struct ArgSpec {
  PyKind kind = PyKind::Unsupported;
  bool optional = false;
  bool has_default = false;
  c10::IValue dflt;
  PyObject* name = nullptr;  // the Python entry's name of it (for keywords), owned
};

struct Overload {
  std::unique_ptr<OpKernel> kernel;
  std::vector<ArgSpec> args;
  size_t npos = 0;  // positional arguments (the others are keyword-only)
};

// Keys that call for more than a dense tensor's kernel: the Python entry serves those calls.
// (Made once: every direct call tests the thread's keys and each tensor's against them.)
const c10::DispatchKeySet& special_keys() {
  using K = c10::DispatchKey;
  static const c10::DispatchKeySet keys({K::Python, K::PythonTLSSnapshot, K::Functionalize,
                                          K::FuncTorchDynamicLayerFrontMode, K::FuncTorchDynamicLayerBackMode,
                                          K::FuncTorchBatched, K::BatchedNestedTensor, K::FuncTorchVmapMode, K::Batched,
                                          K::VmapMode, K::FuncTorchGradWrapper, K::ZeroTensor, K::Sparse, K::SparseCsr,
                                          K::NestedTensor, K::Quantized, K::PreDispatch, K::PythonDispatcher});
  return keys;
}

PyKind kind_of(const c10::TypePtr& real, bool& optional) {
  c10::TypePtr t = real;
  optional = false;
  if (auto o = t->cast<c10::OptionalType>()) {
    t = o->getElementType();
    optional = true;
  }
  switch (t->kind()) {
    case c10::TypeKind::TensorType: return PyKind::Tensor;
    case c10::TypeKind::NumberType: return PyKind::Scalar;
    case c10::TypeKind::IntType: return PyKind::Int;
    case c10::TypeKind::FloatType: return PyKind::Float;
    case c10::TypeKind::BoolType: return PyKind::Bool;
    case c10::TypeKind::ScalarTypeType: return PyKind::ScalarType;
    case c10::TypeKind::StringType: return PyKind::Str;
    case c10::TypeKind::ListType:
      if (t->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::IntType) return PyKind::IntList;
      return PyKind::Unsupported;
    default: return PyKind::Unsupported;
  }
}

bool int_of(PyObject* o, int64_t& v) {
  if (!PyLong_CheckExact(o)) return false;  // not a bool, not an int subclass
  int overflow = 0;
  v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// ``o`` as argument ``spec`` of the schema; false where it is not one that the direct path
// takes as such (the Python entry then decides).
bool ivalue_of(PyObject* o, const ArgSpec& spec, c10::IValue& out, bool strict = false) {
  if (o == Py_None) {
    if (!spec.optional) return false;
    out = c10::IValue();
    return true;
  }
  switch (spec.kind) {
    case PyKind::Tensor:
      if (!THPVariable_CheckExact(o)) return false;
      out = THPVariable_Unpack(o);
      return true;
    case PyKind::Scalar: {
      if (PyBool_Check(o)) {
        out = c10::IValue(o == Py_True);
        return true;
      }
      if (PyFloat_CheckExact(o)) {
        out = c10::IValue(PyFloat_AS_DOUBLE(o));
        return true;
      }
      int64_t v;
      if (!int_of(o, v)) return false;
      out = c10::IValue(v);
      return true;
    }
    case PyKind::Int: {
      int64_t v;
      if (!int_of(o, v)) return false;
      out = c10::IValue(v);
      return true;
    }
    case PyKind::Float: {
      if (PyFloat_CheckExact(o)) {
        out = c10::IValue(PyFloat_AS_DOUBLE(o));
        return true;
      }
      int64_t v;
      if (!int_of(o, v)) return false;
      out = c10::IValue(static_cast<double>(v));
      return true;
    }
    case PyKind::Bool:
      if (!PyBool_Check(o)) return false;
      out = c10::IValue(o == Py_True);
      return true;
    case PyKind::IntList: {
      int64_t one;
      if (!strict && int_of(o, one)) {  // a single int for an int[] (x.mean(-1)), as the Python entries take it
        out = c10::IValue(c10::List<int64_t>({one}));
        return true;
      }
      if (!PyList_CheckExact(o) && !PyTuple_Check(o)) return false;  // a torch.Size is a tuple
      const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
      PyObject** items = PySequence_Fast_ITEMS(o);
      c10::List<int64_t> l;
      l.reserve(static_cast<size_t>(n));
      for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v;
        if (!int_of(items[i], v)) return false;
        l.push_back(v);
      }
      out = c10::IValue(std::move(l));
      return true;
    }
    case PyKind::ScalarType:
      if (!THPDtype_Check(o)) return false;
      out = c10::IValue(static_cast<int64_t>(reinterpret_cast<THPDtype*>(o)->scalar_type));
      return true;
    case PyKind::Str: {
      if (!PyUnicode_CheckExact(o)) return false;
      const char* u = PyUnicode_AsUTF8(o);
      if (u == nullptr) {
        PyErr_Clear();
        return false;
      }
      out = c10::IValue(std::string(u));
      return true;
    }
    case PyKind::Unsupported: return false;
  }
  return false;
}

struct DirectOp {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* dict;  // __name__, __doc__, __wrapped__ (set from Python)
  PyObject* fallback;
  std::vector<Overload>* overloads;
  c10::DeviceType device_type;
  bool packet;  // torch.ops.tritonjit.<op>: strict binding; RecordFunction and the tracer see the call
};

std::atomic<uint64_t> g_direct_hits{0}, g_direct_python{0};

// Whether the plain path may serve a call with tensor ``t``: a dense tensor of the backend's
// device (or a 0-dim CPU tensor: a scalar) without autograd work.
bool plain_tensor(const at::Tensor& t, c10::DeviceType device_type, bool grad_mode) {
  if (!t.defined()) return true;
  const c10::DeviceType dt = t.device().type();
  if (dt != device_type && !(dt == c10::DeviceType::CPU && t.dim() == 0)) return false;
  return !t.key_set().has_any(special_keys()) && !autograd_work(t, grad_mode);
}

// The call's arguments bound to overload ``ov`` in ``vals``; false where they do not bind (or
// a tensor asks for more than the plain path, see plain_tensor).
bool bind(const Overload& ov, PyObject* const* args, size_t nargs, PyObject* kwnames, c10::DeviceType device_type,
          bool grad_mode, bool strict, c10::SmallVector<c10::IValue, 8>& vals) {
  const size_t n = ov.args.size();
  if (nargs > ov.npos) return false;
  vals.clear();
  vals.resize(n);
  uint64_t given = 0;  // schemas here have fewer than 64 arguments (checked at creation)
  for (size_t i = 0; i < nargs; i++) {
    if (!ivalue_of(args[i], ov.args[i], vals[i], strict)) return false;
    given |= uint64_t{1} << i;
  }
  if (kwnames != nullptr) {
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
      PyObject* kw = PyTuple_GET_ITEM(kwnames, k);
      size_t j = 0;
      while (j < n && ov.args[j].name != kw && PyUnicode_Compare(ov.args[j].name, kw) != 0) j++;
      if (j == n || (given >> j & 1)) return false;  // a keyword the op does not have (out=), or twice
      if (!ivalue_of(args[nargs + static_cast<size_t>(k)], ov.args[j], vals[j], strict)) return false;
      given |= uint64_t{1} << j;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (!(given >> i & 1)) {
      if (!ov.args[i].has_default) return false;
      vals[i] = ov.args[i].dflt;
    }
    if (vals[i].isTensor() && !plain_tensor(vals[i].toTensor(), device_type, grad_mode)) return false;
  }
  return true;
}

PyObject* python_of(c10::IValue& v) {
  if (v.isTensor()) return THPVariable_Wrap(std::move(v).toTensor());
  return torch::jit::toPyObject(std::move(v)).release().ptr();
}

PyObject* direct_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* d = reinterpret_cast<DirectOp*>(self);
  const size_t nargs = PyVectorcall_NARGS(nargsf);
  HANDLE_TH_ERRORS
  if (!at::impl::torch_function_mode_enabled() && !c10::impl::dispatch_mode_enabled() &&
      !c10::impl::tls_local_dispatch_key_set().included_.has_any(special_keys()) &&
      !(d->packet && (at::hasCallbacks() || torch::jit::tracer::isTracing()))) {
    const bool grad_mode = at::GradMode::is_enabled();
    c10::SmallVector<c10::IValue, 8> vals;
    OpKernel::Results results;
    for (Overload& ov : *d->overloads) {
      if (!bind(ov, args, nargs, kwnames, d->device_type, grad_mode, d->packet, vals)) continue;
      if (!ov.kernel->serve(vals.data(), results)) break;  // bound, no plan: the Python entry
      g_direct_hits++;
      if (results.size() == 1) return python_of(results[0]);
      Ref tuple(checked(PyTuple_New(static_cast<Py_ssize_t>(results.size()))));
      for (size_t k = 0; k < results.size(); k++) {
        PyObject* o = python_of(results[k]);
        if (o == nullptr) return nullptr;
        PyTuple_SET_ITEM(tuple.p, static_cast<Py_ssize_t>(k), o);
      }
      return tuple.release();
    }
  }
  g_direct_python++;
  return PyObject_Vectorcall(d->fallback, args, nargsf, kwnames);
  END_HANDLE_TH_ERRORS
}

void direct_dealloc(PyObject* self) {
  auto* d = reinterpret_cast<DirectOp*>(self);
  Py_CLEAR(d->dict);
  Py_CLEAR(d->fallback);
  if (d->overloads != nullptr) {
    for (auto& ov : *d->overloads)
      for (auto& a : ov.args) Py_CLEAR(a.name);
    delete d->overloads;  // the kernels keep their planners (process lifetime, as registered kernels)
  }
  Py_TYPE(self)->tp_free(self);
}

PyObject* direct_repr(PyObject* self) {
  auto* d = reinterpret_cast<DirectOp*>(self);
  PyObject* name = d->dict != nullptr ? PyDict_GetItemString(d->dict, "__name__") : nullptr;
  return PyUnicode_FromFormat("<tritonjit_ops direct entry %S>", name != nullptr ? name : Py_None);
}

PyTypeObject DirectOpType = {PyVarObject_HEAD_INIT(nullptr, 0)};

bool init_direct_type() {
  DirectOpType.tp_name = "tritonjit_ops._native_ops.DirectEntry";
  DirectOpType.tp_basicsize = sizeof(DirectOp);
  DirectOpType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  DirectOpType.tp_vectorcall_offset = offsetof(DirectOp, vectorcall);
  DirectOpType.tp_dictoffset = offsetof(DirectOp, dict);
  DirectOpType.tp_call = PyVectorcall_Call;
  DirectOpType.tp_dealloc = direct_dealloc;
  DirectOpType.tp_repr = direct_repr;
  DirectOpType.tp_getattro = PyObject_GenericGetAttr;
  DirectOpType.tp_setattro = PyObject_GenericSetAttr;
  DirectOpType.tp_doc = "A tritonjit_ops direct entry served by the C++ operator path (see _native_ops.cpp)";
  return PyType_Ready(&DirectOpType) == 0;
}

// ---- module functions -----------------------------------------------------------------------
void free_library(PyObject* cap) {
  delete static_cast<torch::Library*>(PyCapsule_GetPointer(cap, "tritonjit_ops.library"));
}

// The operator ``ns::name`` ("add.Tensor": overload after the dot); throws where none exists.
c10::OperatorHandle schema_of(const char* ns, const char* name) {
  const c10::OperatorName op = operator_name(ns, name);
  return c10::Dispatcher::singleton().findSchemaOrThrow(op.name.c_str(), op.overload_name.c_str());
}

// A planner's truthy attribute ``name`` (false where it has none).
bool marked(PyObject* planner, const char* name) {
  if (planner == Py_None || !PyObject_HasAttrString(planner, name)) return false;
  Ref flag(checked(PyObject_GetAttrString(planner, name)));
  const int t = PyObject_IsTrue(flag.p);
  if (t < 0) rethrow_python();
  return t == 1;
}

// OpKernel's keying bits: _plan.value_keyed(planner) (its plans may bake in the values of
// Scalar arguments), _plan.tf32_keyed(planner) (they bake in torch's allow_tf32 flag)
// and, in bits 8-15, _plan.list_limit(n)(planner): calls with a tensor list longer than n go
// to aten's kernel
unsigned keying_of(PyObject* planner) {
  unsigned limit = 0;
  if (planner != Py_None && PyObject_HasAttrString(planner, "list_limit")) {
    Ref n(checked(PyObject_GetAttrString(planner, "list_limit")));
    const long v = PyLong_AsLong(n.p);
    if (v == -1 && PyErr_Occurred()) rethrow_python();
    if (v < 1 || v > 255) throw std::invalid_argument("tritonjit_ops: a planner's list_limit must be 1 to 255");
    limit = static_cast<unsigned>(v);
  }
  return (marked(planner, "value_keyed_scalars") ? 1u : 0u) | (marked(planner, "tf32_keyed") ? 2u : 0u) | limit << 8;
}

c10::DeviceType device_type_of(const char* device) {
  const std::string dev(device);
  return dev.empty() || dev == "cpu" ? c10::DeviceType::CPU : c10::Device(dev).type();
}

// direct(namespace, [(overload, planner, names, defaults), ...], fallback, device type) -> a
// direct entry (DirectOp). names: the Python entry's name of each schema argument; defaults:
// its default of each, or ``missing`` where it has none (a required argument).
PyObject* py_direct(PyObject*, PyObject* args) {
  const char *ns, *device;
  PyObject *entries, *fallback, *missing;
  int packet = 0;
  if (!PyArg_ParseTuple(args, "sOOsO|p", &ns, &entries, &fallback, &device, &missing, &packet)) return nullptr;
  HANDLE_TH_ERRORS
  auto overloads = std::make_unique<std::vector<Overload>>();
  const c10::DeviceType device_type = device_type_of(device);
  Ref fast(checked(PySequence_Fast(entries, "entries must be a sequence")));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
    const char* name;
    PyObject *planner, *names, *defaults;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast.p, i), "sOOO", &name, &planner, &names, &defaults))
      return nullptr;
    const auto handle = schema_of(ns, name);
    const auto& schema = handle.schema();
    const auto& sargs = schema.arguments();
    if (!PyTuple_Check(names) || !PyTuple_Check(defaults) || PyTuple_GET_SIZE(names) != static_cast<Py_ssize_t>(sargs.size()) ||
        PyTuple_GET_SIZE(defaults) != static_cast<Py_ssize_t>(sargs.size()))
      throw std::runtime_error(std::string("tritonjit_ops.direct: ") + name + ": one name and default per argument");
    if (sargs.size() >= 64) throw std::runtime_error(std::string("tritonjit_ops.direct: ") + name + ": too many arguments");
    Overload ov;
    for (size_t k = 0; k < sargs.size(); k++) {
      ArgSpec a;
      a.kind = kind_of(sargs[k].real_type(), a.optional);
      a.name = PyTuple_GET_ITEM(names, static_cast<Py_ssize_t>(k));
      Py_INCREF(a.name);
      PyObject* dflt = PyTuple_GET_ITEM(defaults, static_cast<Py_ssize_t>(k));
      if (dflt != missing) {
        if (!ivalue_of(dflt, a, a.dflt, packet != 0)) {
          Py_DECREF(a.name);
          throw std::runtime_error(std::string("tritonjit_ops.direct: ") + name + ": the default of argument '" +
                                   sargs[k].name() + "' does not fit its schema type");
        }
        a.has_default = true;
      }
      if (!sargs[k].kwarg_only()) ov.npos = k + 1;
      ov.args.push_back(std::move(a));
    }
    ov.kernel = std::make_unique<OpKernel>(schema, planner == Py_None ? nullptr : planner, fallback, false,
                                           device_type, keying_of(planner));
    overloads->push_back(std::move(ov));
  }
  auto* d = PyObject_New(DirectOp, &DirectOpType);
  if (d == nullptr) return nullptr;
  d->vectorcall = direct_call;
  d->dict = nullptr;
  Py_INCREF(fallback);
  d->fallback = fallback;
  d->overloads = overloads.release();
  d->device_type = device_type;
  d->packet = packet != 0;
  return reinterpret_cast<PyObject*>(d);
  END_HANDLE_TH_ERRORS
}

// register(namespace, dispatch_key, [(overload, planner or None, impl), ...], redispatch, device
// type) -> a capsule; the registrations last until the capsule is released (release()) or
// collected. redispatch: at BackendSelect, over aten's own kernels (see OpKernel).
PyObject* py_register(PyObject*, PyObject* args) {
  const char *ns, *key, *device;
  PyObject* entries;
  int redispatch = 0;
  if (!PyArg_ParseTuple(args, "ssOps", &ns, &key, &entries, &redispatch, &device)) return nullptr;
  HANDLE_TH_ERRORS
  const c10::DeviceType device_type = device_type_of(device);
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::parseDispatchKey(key), __FILE__,
                                              __LINE__);
  Ref fast(checked(PySequence_Fast(entries, "entries must be a sequence")));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
    const char* name;
    PyObject *planner, *impl;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast.p, i), "sOO", &name, &planner, &impl)) return nullptr;
    const auto handle = schema_of(ns, name);
    const unsigned keying = keying_of(planner);
    lib->impl(name, torch::CppFunction::makeFromBoxedFunctor(
                        std::make_unique<OpKernel>(handle.schema(), planner == Py_None ? nullptr : planner, impl,
                                                   redispatch != 0, device_type, keying)));
  }
  return PyCapsule_New(lib.release(), "tritonjit_ops.library", free_library);
  END_HANDLE_TH_ERRORS
}

// register_gates(namespace, dispatch_key, [(overload, autograd kernel), ...]) -> a capsule, as
// register()'s: an AutogradGate per overload at ``dispatch_key`` (the backend's Autograd key).
PyObject* py_register_gates(PyObject*, PyObject* args) {
  const char *ns, *key;
  PyObject* entries;
  if (!PyArg_ParseTuple(args, "ssO", &ns, &key, &entries)) return nullptr;
  HANDLE_TH_ERRORS
  // A gate passes the keyset through torch's pybind11 binding of DispatchKeySet; where this
  // module cannot see it (another pybind11 ABI), no gates: the Python kernels keep serving.
  pybind11::object probe = pybind11::cast(c10::DispatchKeySet(c10::DispatchKey::CPU));
  (void)probe;
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::parseDispatchKey(key), __FILE__,
                                              __LINE__);
  Ref fast(checked(PySequence_Fast(entries, "entries must be a sequence")));
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.p); i++) {
    const char* name;
    PyObject* kernel;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast.p, i), "sO", &name, &kernel)) return nullptr;
    const auto handle = schema_of(ns, name);
    lib->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutogradGate>(handle.schema(), kernel)));
  }
  return PyCapsule_New(lib.release(), "tritonjit_ops.library", free_library);
  END_HANDLE_TH_ERRORS
}

PyObject* py_release(PyObject*, PyObject* cap) {
  auto* lib = static_cast<torch::Library*>(PyCapsule_GetPointer(cap, "tritonjit_ops.library"));
  if (lib == nullptr) return nullptr;
  if (PyCapsule_SetDestructor(cap, nullptr) < 0) return nullptr;
  delete lib;
  PyCapsule_SetName(cap, "tritonjit_ops.library.released");
  Py_RETURN_NONE;
}

// clear_plans(namespace, names or None): forget the cached plans of the named operators of
// ``namespace`` ("mm", "add.Tensor", as register() takes them), or of all: their next call
// asks its planner again (a policy whose decisions were reset, see attention.clear_routes()).
PyObject* py_clear_plans(PyObject*, PyObject* args) {
  const char* ns;
  PyObject* names;
  if (!PyArg_ParseTuple(args, "sO", &ns, &names)) return nullptr;
  HANDLE_TH_ERRORS
  std::vector<std::string> wanted;
  if (names != Py_None) {
    Ref seq(checked(PySequence_Fast(names, "clear_plans(namespace, names): a sequence of operator names or None")));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.p); i++) {
      const char* n = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq.p, i));
      if (n == nullptr) return nullptr;
      wanted.push_back(qualified(operator_name(ns, n)));
    }
  }
  std::vector<std::shared_ptr<PlanCache>> drop;
  {
    std::lock_guard<std::mutex> lock(g_caches_mu);
    for (auto& [name, cache] : g_caches) {
      const std::string op = name.substr(0, name.rfind('@'));
      if (names == Py_None || std::find(wanted.begin(), wanted.end(), op) != wanted.end()) drop.push_back(cache);
    }
  }
  {
    pybind11::gil_scoped_release nogil;  // a kernel holding a cache's lock may wait for the GIL (find())
    for (auto& c : drop) {
      std::unique_lock<std::shared_mutex> lock(c->mu);
      c->plans.clear();
    }
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyObject* py_stats(PyObject*, PyObject*) {
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "direct_hits",
                       static_cast<unsigned long long>(g_direct_hits.load()), "direct_python_calls",
                       static_cast<unsigned long long>(g_direct_python.load()), "plan_hits", static_cast<unsigned long long>(g_hits.load()),
                       "plans_made", static_cast<unsigned long long>(g_plans.load()), "python_calls",
                       static_cast<unsigned long long>(g_fallback_calls.load()), "launches",
                       static_cast<unsigned long long>(g_launches.load()), "aten_calls",
                       static_cast<unsigned long long>(g_aten_calls.load()), "autograd_python_calls",
                       static_cast<unsigned long long>(g_autograd_python_calls.load()));
}

// aten(name, *args) -> aten's own kernel of ``name`` ("mm", "bmm", "addmm", "baddbmm") for the tensors'
// backend, below enable()'s kernel (redispatched past BackendSelect): what a planner times
// tritonjit's launches against.
PyObject* py_aten(PyObject*, PyObject* args) {
  HANDLE_TH_ERRORS
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n < 2) throw std::runtime_error("aten(name, *args)");
  const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(args, 0));
  if (name == nullptr) return nullptr;
  const std::string op_name(name);
  if (op_name != "mm" && op_name != "bmm" && op_name != "addmm" && op_name != "baddbmm")
    throw std::runtime_error("tritonjit_ops: aten() times mm, bmm, addmm and baddbmm, not " + op_name);
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + op_name).c_str(), "");
  torch::jit::Stack stack;
  c10::DispatchKeySet ks;
  for (Py_ssize_t i = 1; i < n; i++) {
    PyObject* o = PyTuple_GET_ITEM(args, i);
    if (THPVariable_Check(o)) {
      stack.emplace_back(THPVariable_Unpack(o));
      ks = ks | THPVariable_Unpack(o).key_set();
    } else if (PyBool_Check(o)) {
      stack.emplace_back(c10::Scalar(o == Py_True));
    } else if (PyLong_Check(o)) {
      stack.emplace_back(c10::Scalar(static_cast<int64_t>(PyLong_AsLongLong(o))));
    } else {
      stack.emplace_back(c10::Scalar(PyFloat_AsDouble(o)));
    }
  }
  {
    pybind11::gil_scoped_release nogil;
    op.redispatchBoxed(ks & kAfterBackendSelect, &stack);
  }
  return THPVariable_Wrap(stack.back().toTensor());
  END_HANDLE_TH_ERRORS
}

PyObject* py_init(PyObject*, PyObject* args) {
  if (!PyArg_ParseTuple(args, "OOOOOO", &g_In, &g_Out, &g_Tmp, &g_Arg, &g_InItem, &g_Const)) return nullptr;
  Py_INCREF(g_Const);
  Py_INCREF(g_InItem);
  Py_INCREF(g_In);
  Py_INCREF(g_Out);
  Py_INCREF(g_Tmp);
  Py_INCREF(g_Arg);
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"init", py_init, METH_VARARGS, "init(In, Out, Tmp, Arg, InItem, Const): the plan reference classes"},
    {"register", py_register, METH_VARARGS,
     "register(namespace, dispatch_key, [(overload, planner, impl)]) -> registration capsule"},
    {"register_gates", py_register_gates, METH_VARARGS,
     "register_gates(namespace, autograd_dispatch_key, [(overload, autograd kernel)]) -> registration capsule"},
    {"release", py_release, METH_O, "release(registration): undo a register() or register_gates()"},
    {"stats", py_stats, METH_NOARGS,
     "counters: plan_hits, plans_made, python_calls, launches, aten_calls, autograd_python_calls"},
    {"clear_plans", py_clear_plans, METH_VARARGS,
     "clear_plans(namespace, names or None): forget those operators' cached plans"},
    {"direct", py_direct, METH_VARARGS,
     "direct(namespace, [(overload, planner, names, defaults)], fallback, device_type, missing, packet=False) -> a "
     "direct entry"},
    {"aten", py_aten, METH_VARARGS, "aten(name, *args): aten's own kernel of mm, bmm, addmm or baddbmm, below enable()'s"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_native_ops", "tritonjit_ops' C++ operator path", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__native_ops(void) {
  if (!init_direct_type()) return nullptr;
  return PyModule_Create(&kModule);
}
