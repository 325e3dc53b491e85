// tritonjit_ops._prologue_native: the checks and the output allocation that start a
// small operator call, in one C++ call (see _prologue.py, which holds the Python
// equivalents and builds this module in the background on first use).
//
// Through Python these take about a microsecond per call (each x.dtype, x.shape,
// x.is_contiguous() is a Python call; torch.empty_like parses its arguments); here
// they are a few field reads and one at::empty_like. Anything unusual answers None
// and the caller takes its general path, which validates and reports errors.
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/autograd/python_variable.h>

namespace {

PyObject* g_empty_like = nullptr;  // torch.empty_like: like() of anything not plain

bool plain(PyObject* v) {
  return THPVariable_CheckExact(v) && !at::impl::torch_function_mode_enabled();
}

bool flat_float(const at::Tensor& t) {
  const auto st = t.scalar_type();
  return (st == at::kFloat || st == at::kHalf || st == at::kBFloat16) && t.is_contiguous() && !t.is_neg() &&
         !t.is_conj() && t.has_storage();
}

// binary(x, y) -> (out, numel, upcast) for two plain tensors of one float dtype
// (fp32/fp16/bf16), one shape, one device, both contiguous; else None.
PyObject* binary(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !plain(args[0]) || !plain(args[1])) Py_RETURN_NONE;
  try {
    const at::Tensor& x = THPVariable_Unpack(args[0]);
    const at::Tensor& y = THPVariable_Unpack(args[1]);
    if (x.scalar_type() != y.scalar_type() || !flat_float(x) || !flat_float(y) || x.sizes() != y.sizes() ||
        x.device() != y.device())
      Py_RETURN_NONE;
    PyObject* out = THPVariable_Wrap(at::empty_like(x, at::MemoryFormat::Contiguous));
    if (out == nullptr) return nullptr;
    return Py_BuildValue("(NLO)", out, static_cast<long long>(x.numel()),
                         x.scalar_type() == at::kFloat ? Py_False : Py_True);
  } catch (...) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
}

// like(x) -> torch.empty_like(x, memory_format=torch.contiguous_format); for a plain
// tensor without the Python call, for anything else through it (same errors).
PyObject* like(PyObject*, PyObject* v) {
  if (plain(v)) {
    try {
      return THPVariable_Wrap(at::empty_like(THPVariable_Unpack(v), at::MemoryFormat::Contiguous));
    } catch (...) {
      PyErr_Clear();
    }
  }
  return PyObject_CallOneArg(g_empty_like, v);
}

PyMethodDef kMethods[] = {
    {"binary", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(binary)), METH_FASTCALL,
     "binary(x, y) -> (out, numel, upcast) or None"},
    {"like", like, METH_O, "like(x) -> torch.empty_like(x) in contiguous format"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_prologue_native", "tritonjit_ops call prologues in C++", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__prologue_native(void) {
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == nullptr) return nullptr;
  g_empty_like = PyObject_GetAttrString(torch, "empty_like");
  Py_DECREF(torch);
  if (g_empty_like == nullptr) return nullptr;
  return PyModule_Create(&kModule);
}
