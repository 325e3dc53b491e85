// tritonjit._native._torch_tensor: the tensor reader (tritonjit_tensor.h) for torch.
//
// Built on first use against the installed torch (see torch_reader.py), as Triton
// builds its launchers: torch's headers are not there when tritonjit-core is built.
// Reading a tensor's fields through torch's C++ API costs a few nanoseconds, where
// the Python calls data_ptr() and .dtype cost about a hundred (argument parsing,
// the __torch_function__ check, boxing the pointer in a Python int).
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

#include "tritonjit_tensor.h"

namespace {

// An active torch-function mode sees every Python-level call to data_ptr(): the reader
// declines every tensor then (two thread-local reads in libtorch: the batch companion
// lets the dispatcher make this check once per launch instead of once per tensor).
int modes_active() { return at::impl::torch_function_mode_enabled() ? 1 : 0; }

// read_tensor less the mode check.
int read_unchecked(PyObject* v, uint64_t* ptr, PyObject** dtype, int* device) {
  // Exact torch.Tensor / nn.Parameter only: a subclass may override data_ptr or
  // __torch_function__.
  if (!THPVariable_CheckExact(v)) return 1;
  try {
    const at::Tensor& t = THPVariable_Unpack(v);
    if (!t.defined() || !t.has_storage()) return 1;
    *ptr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));  // as Tensor.data_ptr()
    *dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(t.scalar_type()));
    *device = static_cast<int>(t.get_device());
    return 0;
  } catch (...) {  // nothing may cross into C; the Python path reports the error
    return 1;
  }
}

int read_tensor(PyObject* v, uint64_t* ptr, PyObject** dtype, int* device) {
  return modes_active() ? 1 : read_unchecked(v, ptr, dtype, device);
}

int current_stream(int device_type, int device, uint64_t* out) {
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 10
  // c10::Stream::native_handle() exists from torch 2.10: before, the stream is asked of Python
  (void)device_type, (void)device, (void)out;
  return 1;
#else
  try {
    const auto type = static_cast<c10::DeviceType>(device_type);
    const c10::Stream s = c10::impl::getDeviceGuardImpl(type)->getStream(
        c10::Device(type, static_cast<c10::DeviceIndex>(device)));
    *out = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s.native_handle()));
    return 0;
  } catch (...) {  // no such backend registered, or no native handle: ask Python
    return 1;
  }
#endif
}

const tj_tensor_reader kReader = {TJ_TENSOR_READER_ABI, read_tensor, current_stream};
const tj_tensor_reader_batch kBatch = {TJ_TENSOR_READER_BATCH_ABI, &kReader, modes_active, read_unchecked};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_torch_tensor",
                       "tritonjit's tensor reader for torch (see tritonjit_tensor.h)", -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_tensor(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  PyObject* cap = PyCapsule_New(const_cast<tj_tensor_reader*>(&kReader), TJ_TENSOR_READER_CAPSULE, nullptr);
  if (cap == nullptr || PyModule_AddObject(m, "reader", cap) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  cap = PyCapsule_New(const_cast<tj_tensor_reader_batch*>(&kBatch), TJ_TENSOR_READER_BATCH_CAPSULE, nullptr);
  if (cap == nullptr || PyModule_AddObject(m, "reader_batch", cap) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
