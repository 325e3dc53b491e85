/* tritonjit_cuda._driver: the CUDA driver boundary of the tritonjit CUDA backend.
 *
 * Built without CUDA headers or libcuda: the few driver types and constants used
 * are declared below, and libcuda.so.1 is opened with dlopen on first use, its
 * symbols resolved once (like Triton's driver.c). So the extension builds on a
 * machine with no GPU and no CUDA toolkit, and importing it never touches the GPU.
 *
 * What it holds:
 *   probe()                       -> (ok, reason): can libcuda be opened, does a device exist
 *   device_props(dev)             -> dict of the limits the plugin checks against
 *   load_binary(name, cubin, dev) -> (module, function, ctx, n_regs, n_spills, max_threads, static_shared)
 *   set_dynamic_shared(fn, dev, n), is_capturing(stream)
 *   pack(type_codes, values)      -> [bytes]: the exact bytes each kernel parameter gets
 *   param_layout(codes, n_scratch) -> (offsets, size): where a launch packs each parameter in
 *                                    the one buffer it hands the driver
 *   fill_tma_descriptor(...)      -> bytes: a CUtensorMap (cuTensorMapEncodeTiled), the
 *                                    128-byte nvTmaDesc parameter of a tensor descriptor
 *   Launcher(...)                 -> the fused pack + launch; callable(grid, stream, args),
 *                                    and a ``tritonjit_launch`` capsule (tritonjit_launch.h)
 *                                    through which the core's C dispatcher launches with no
 *                                    Python-level call in between.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tritonjit_launch.h"
#include "tritonjit_tensor.h"

/* ---- the slice of the CUDA driver API this file uses (values from cuda.h) -------- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS 0
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X 5
#define CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y 6
#define CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z 7
#define CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK 12
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES 3
#define CU_FUNC_ATTRIBUTE_NUM_REGS 4
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED 14
#define CU_FUNC_CACHE_PREFER_SHARED 1
#define CU_LAUNCH_ATTRIBUTE_COOPERATIVE 2
#define CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4
#define CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE 5
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define CU_CLUSTER_SCHEDULING_POLICY_SPREAD 1
/* cuLaunchKernel's ``extra``: the kernel parameters as one packed buffer */
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

typedef union {
  char pad[64];
  int cooperative;
  struct { unsigned int x, y, z; } clusterDim;
  int clusterSchedulingPolicyPreference;
  int programmaticStreamSerializationAllowed;
} CUlaunchAttributeValue;

typedef struct {
  int id;
  char pad[8 - sizeof(int)];
  CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

/* ---- libcuda, resolved once ------------------------------------------------------- */
#define CU_FUNCS(X)                                                                                          \
  X(cuInit, CUresult, (unsigned int))                                                                        \
  X(cuGetErrorString, CUresult, (CUresult, const char **))                                                   \
  X(cuGetErrorName, CUresult, (CUresult, const char **))                                                     \
  X(cuDeviceGetCount, CUresult, (int *))                                                                     \
  X(cuDeviceGet, CUresult, (CUdevice *, int))                                                                \
  X(cuDeviceGetName, CUresult, (char *, int, CUdevice))                                                      \
  X(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))                                                  \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                             \
  X(cuCtxGetCurrent, CUresult, (CUcontext *))                                                                \
  X(cuCtxPushCurrent_v2, CUresult, (CUcontext))                                                              \
  X(cuCtxPopCurrent_v2, CUresult, (CUcontext *))                                                             \
  X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                                  \
  X(cuModuleUnload, CUresult, (CUmodule))                                                                    \
  X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                                   \
  X(cuFuncGetAttribute, CUresult, (int *, int, CUfunction))                                                  \
  X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                                    \
  X(cuFuncSetCacheConfig, CUresult, (CUfunction, int))                                                       \
  X(cuLaunchKernel, CUresult,                                                                                \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **,    \
     void **))                                                                                               \
  X(cuLaunchKernelEx, CUresult, (const CUlaunchConfig *, CUfunction, void **, void **))                      \
  X(cuStreamIsCapturing, CUresult, (CUstream, int *))

/* CUDA 12+ (Hopper TMA), resolved on first use so that an older driver still loads */
typedef CUresult (*cuTensorMapEncodeTiled_t)(void *, int, unsigned int, void *, const uint64_t *, const uint64_t *,
                                             const unsigned int *, const unsigned int *, int, int, int, int);
static cuTensorMapEncodeTiled_t p_cuTensorMapEncodeTiled = NULL;
/* CUDA 12.4+: each kernel parameter's offset and size, resolved on first use (NULL: older driver) */
typedef CUresult (*cuFuncGetParamInfo_t)(CUfunction, size_t, size_t *, size_t *);
static cuFuncGetParamInfo_t p_cuFuncGetParamInfo = NULL;
static int param_info_resolved = 0;

#define DECLARE(name, ret, args) static ret(*p_##name) args = NULL;
CU_FUNCS(DECLARE)
#undef DECLARE

static void *libcuda = NULL;
static char libcuda_error[512] = "";

/* 0 when every symbol is there; else -1 with a Python RuntimeError set. */
static int ensure_libcuda(void) {
  if (libcuda != NULL) return 0;
  if (libcuda_error[0]) {
    PyErr_SetString(PyExc_RuntimeError, libcuda_error);
    return -1;
  }
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *why = dlerror();
    snprintf(libcuda_error, sizeof libcuda_error, "libcuda.so.1 (the NVIDIA driver) was not found: %s",
             why ? why : "dlopen failed");
    PyErr_SetString(PyExc_RuntimeError, libcuda_error);
    return -1;
  }
#define RESOLVE(name, ret, args)                                                                             \
  p_##name = (ret(*) args)dlsym(h, #name);                                                                   \
  if (p_##name == NULL) {                                                                                    \
    snprintf(libcuda_error, sizeof libcuda_error, "libcuda.so.1 lacks %s (driver too old?)", #name);        \
    dlclose(h);                                                                                              \
    PyErr_SetString(PyExc_RuntimeError, libcuda_error);                                                      \
    return -1;                                                                                               \
  }
  CU_FUNCS(RESOLVE)
#undef RESOLVE
  CUresult r = p_cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    p_cuGetErrorName(r, &name);
    snprintf(libcuda_error, sizeof libcuda_error, "cuInit failed: %s (no usable NVIDIA GPU?)",
             name ? name : "unknown error");
    dlclose(h);
    PyErr_SetString(PyExc_RuntimeError, libcuda_error);
    return -1;
  }
  libcuda = h;
  return 0;
}

static PyObject *GridError = NULL;      /* tritonjit.GridError */
static PyObject *ArgumentError = NULL;  /* tritonjit.ArgumentError */
static PyObject *raw_stream_fn = NULL;  /* torch._C._cuda_getCurrentRawStream */
/* the core's torch reader (tritonjit_tensor.h), when built: current streams without Python */
static const tj_tensor_reader *stream_reader = NULL;
static PyObject *stream_reader_capsule = NULL;
#define C10_DEVICE_TYPE_CUDA 1

/* Set a RuntimeError naming the driver call, its error and the kernel. */
static int cu_fail(CUresult r, const char *call, PyObject *kernel) {
  const char *name = NULL, *text = NULL;
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  if (p_cuGetErrorString) p_cuGetErrorString(r, &text);
  if (kernel)
    PyErr_Format(PyExc_RuntimeError, "CUDA driver error in %s for kernel '%U': %s (%s)", call, kernel,
                 name ? name : "?", text ? text : "");
  else
    PyErr_Format(PyExc_RuntimeError, "CUDA driver error in %s: %s (%s)", call, name ? name : "?",
                 text ? text : "");
  return -1;
}
#define CU_CHECK(call, kernel)                                                                               \
  do {                                                                                                       \
    CUresult _r = (call);                                                                                    \
    if (_r != CUDA_SUCCESS) {                                                                                \
      cu_fail(_r, #call, kernel);                                                                            \
      goto fail;                                                                                             \
    }                                                                                                        \
  } while (0)

/* ---- primary contexts, one per device, retained once -------------------------------- */
#define MAX_DEVICES 64
static CUcontext primary_ctx[MAX_DEVICES];

static CUcontext device_ctx(int dev) {
  if (ensure_libcuda() < 0) return NULL;
  if (dev < 0 || dev >= MAX_DEVICES) {
    PyErr_Format(PyExc_ValueError, "device index %d out of range", dev);
    return NULL;
  }
  if (primary_ctx[dev] == NULL) {
    CUdevice d;
    CUcontext c;
    CU_CHECK(p_cuDeviceGet(&d, dev), NULL);
    CU_CHECK(p_cuDevicePrimaryCtxRetain(&c, d), NULL);
    primary_ctx[dev] = c;
  }
  return primary_ctx[dev];
fail:
  return NULL;
}

/* Make ``ctx`` current if it is not; *pushed says whether to pop afterwards. */
static inline int ctx_enter(CUcontext ctx, int *pushed) {
  CUcontext cur = NULL;
  *pushed = 0;
  p_cuCtxGetCurrent(&cur);
  if (cur != ctx) {
    CUresult r = p_cuCtxPushCurrent_v2(ctx);
    if (r != CUDA_SUCCESS) return cu_fail(r, "cuCtxPushCurrent", NULL);
    *pushed = 1;
  }
  return 0;
}
/* ctx_enter without Python: the driver's result. */
static inline CUresult ctx_enter_raw(CUcontext ctx, int *pushed) {
  CUcontext cur = NULL;
  *pushed = 0;
  p_cuCtxGetCurrent(&cur);
  if (cur == ctx) return CUDA_SUCCESS;
  CUresult r = p_cuCtxPushCurrent_v2(ctx);
  if (r == CUDA_SUCCESS) *pushed = 1;
  return r;
}
static inline void ctx_exit(int pushed) {
  if (pushed) {
    CUcontext c;
    p_cuCtxPopCurrent_v2(&c);
  }
}

/* Whether another Python thread may want the GIL while this one is in the driver. The
 * launch releases the GIL around cuLaunchKernel, which blocks while the stream's launch
 * queue is full, so that other threads run meanwhile; where this thread is the only one
 * of the only interpreter, nobody can take the GIL in between, and releasing and taking
 * it back costs about 0.1 us of a 3 us launch (measured on an H200 host) for nothing. A
 * thread created meanwhile waits for the GIL as it would behind any C call. */
static inline int gil_wanted(void) {
  PyThreadState *ts = PyThreadState_Get();
  PyInterpreterState *is = PyThreadState_GetInterpreter(ts);
  return PyThreadState_Next(ts) != NULL || PyInterpreterState_ThreadHead(is) != ts ||
         PyInterpreterState_Head() != is || PyInterpreterState_Next(is) != NULL;
}

/* ---- module functions ----------------------------------------------------------------- */
static PyObject *py_probe(PyObject *self, PyObject *unused) {
  if (ensure_libcuda() < 0) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *msg = value ? PyObject_Str(value) : PyUnicode_FromString("libcuda unavailable");
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (!msg) return NULL;
    return Py_BuildValue("(ON)", Py_False, msg);
  }
  int n = 0;
  CUresult r = p_cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS || n == 0)
    return Py_BuildValue("(Os)", Py_False, "libcuda.so.1 loaded, but it reports no CUDA device");
  return Py_BuildValue("(ON)", Py_True, PyUnicode_FromFormat("libcuda.so.1 loaded, %d CUDA device(s)", n));
}

static PyObject *py_device_props(PyObject *self, PyObject *arg) {
  int dev = PyLong_AsLong(arg);
  if (dev == -1 && PyErr_Occurred()) return NULL;
  if (ensure_libcuda() < 0) return NULL;
  CUdevice d;
  char name[256] = {0};
  int v[9];
  static const int attrs[9] = {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                               CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                               CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                               CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
                               CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                               CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                               CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                               CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  CU_CHECK(p_cuDeviceGet(&d, dev), NULL);
  CU_CHECK(p_cuDeviceGetName(name, 255, d), NULL);
  for (int i = 0; i < 9; i++) CU_CHECK(p_cuDeviceGetAttribute(&v[i], attrs[i], d), NULL);
  return Py_BuildValue("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "name", name, "major", v[0], "minor", v[1],
                       "max_shared_optin", v[2], "max_threads_per_block", v[3], "max_registers_per_block", v[4],
                       "multiprocessor_count", v[5], "max_grid_x", v[6], "max_grid_y", v[7], "max_grid_z", v[8]);
fail:
  return NULL;
}

/* cuThreadExchangeStreamCaptureMode (CUDA 10.1+), resolved on first use: loading a module
 * while a CUDA graph is captured (the first launch of a variant inside torch.cuda.graph) is
 * a "potentially unsafe" call that global capture mode refuses; it enqueues nothing on the
 * capturing stream, so this thread switches to relaxed mode for the load, then back. */
typedef CUresult (*cuThreadExchangeStreamCaptureMode_t)(int *);
static cuThreadExchangeStreamCaptureMode_t p_exchange_capture_mode = NULL;
#define CU_STREAM_CAPTURE_MODE_RELAXED 2

static int relax_capture_mode(int *saved) {
  if (p_exchange_capture_mode == NULL && libcuda != NULL)
    p_exchange_capture_mode = (cuThreadExchangeStreamCaptureMode_t)dlsym(libcuda, "cuThreadExchangeStreamCaptureMode");
  *saved = CU_STREAM_CAPTURE_MODE_RELAXED;
  return p_exchange_capture_mode != NULL && p_exchange_capture_mode(saved) == CUDA_SUCCESS;
}

static PyObject *py_load_binary(PyObject *self, PyObject *args) {
  const char *name;
  Py_buffer data;
  int dev;
  if (!PyArg_ParseTuple(args, "sy*i", &name, &data, &dev)) return NULL;
  CUcontext ctx = device_ctx(dev);
  CUmodule mod = NULL;
  CUfunction fn = NULL;
  int n_regs = 0, n_spills = 0, max_threads = 0, static_shared = 0, pushed = 0, capture_mode = 0, relaxed = 0;
  if (ctx == NULL) goto fail_nopop;
  if (ctx_enter(ctx, &pushed) < 0) goto fail_nopop;
  relaxed = relax_capture_mode(&capture_mode);
  CUresult load_rc = p_cuModuleLoadData(&mod, data.buf);
  if (relaxed) p_exchange_capture_mode(&capture_mode); /* the caller's mode again */
  CU_CHECK(load_rc, NULL);
  CU_CHECK(p_cuModuleGetFunction(&fn, mod, name), NULL);
  CU_CHECK(p_cuFuncGetAttribute(&n_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn), NULL);
  CU_CHECK(p_cuFuncGetAttribute(&n_spills, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn), NULL);
  CU_CHECK(p_cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn), NULL);
  CU_CHECK(p_cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), NULL);
  ctx_exit(pushed);
  PyBuffer_Release(&data);
  return Py_BuildValue("(KKKiiii)", (unsigned long long)(uintptr_t)mod, (unsigned long long)(uintptr_t)fn,
                       (unsigned long long)(uintptr_t)ctx, n_regs, n_spills / 4, max_threads, static_shared);
fail:
  if (mod) p_cuModuleUnload(mod);
  ctx_exit(pushed);
fail_nopop:
  PyBuffer_Release(&data);
  return NULL;
}

/* Opt in to dynamic shared memory above 48 KiB (cuFuncSetAttribute). */
static PyObject *py_set_dynamic_shared(PyObject *self, PyObject *args) {
  unsigned long long fn;
  int dev, bytes, pushed = 0;
  if (!PyArg_ParseTuple(args, "Kii", &fn, &dev, &bytes)) return NULL;
  CUcontext ctx = device_ctx(dev);
  if (ctx == NULL || ctx_enter(ctx, &pushed) < 0) return NULL;
  CU_CHECK(p_cuFuncSetCacheConfig((CUfunction)(uintptr_t)fn, CU_FUNC_CACHE_PREFER_SHARED), NULL);
  CU_CHECK(p_cuFuncSetAttribute((CUfunction)(uintptr_t)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
           NULL);
  ctx_exit(pushed);
  Py_RETURN_NONE;
fail:
  ctx_exit(pushed);
  return NULL;
}

static PyObject *py_allow_nonportable_cluster(PyObject *self, PyObject *args) {
  unsigned long long fn;
  int dev, pushed = 0;
  if (!PyArg_ParseTuple(args, "Ki", &fn, &dev)) return NULL;
  CUcontext ctx = device_ctx(dev);
  if (ctx == NULL || ctx_enter(ctx, &pushed) < 0) return NULL;
  CU_CHECK(p_cuFuncSetAttribute((CUfunction)(uintptr_t)fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
           NULL);
  ctx_exit(pushed);
  Py_RETURN_NONE;
fail:
  ctx_exit(pushed);
  return NULL;
}

static PyObject *py_is_capturing(PyObject *self, PyObject *arg) {
  unsigned long long s = PyLong_AsUnsignedLongLong(arg);
  if (s == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (ensure_libcuda() < 0) return NULL;
  int status = 0;
  CU_CHECK(p_cuStreamIsCapturing((CUstream)(uintptr_t)s, &status), NULL);
  return PyBool_FromLong(status != 0);
fail:
  return NULL;
}

/* ---- argument packing: Python values -> the bytes the kernel parameters hold ------------ */
/* TY_TMA: a CUtensorMap passed by value (a tensor descriptor lowered to TMA), 128 bytes
 * taken from a bytes-like object; variants with one launch through Python only. */
enum ty {
  TY_PTR = 0, TY_I1, TY_I8, TY_I16, TY_I32, TY_I64, TY_U1, TY_U8, TY_U16, TY_U32, TY_U64,
  TY_FP16, TY_BF16, TY_FP32, TY_FP64, TY_TMA, TY_COUNT
};
static const int ty_size[TY_COUNT] = {8, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 2, 2, 4, 8, 128};
static const char *ty_name[TY_COUNT] = {"pointer", "i1", "i8", "i16", "i32", "i64", "u1", "u8",
                                        "u16", "u32", "u64", "fp16", "bf16", "fp32", "fp64", "nvTmaDesc"};
#define TMA_BYTES 128
#define MAX_TMA 16 /* tensor-descriptor (TMA) arguments of one kernel */

static PyObject *data_ptr_str = NULL;

/* The digest the core's dispatcher makes of one Python value (tj_digest_scalar, shared
 * with it through tritonjit_launch.h); anything else through ``data_ptr()``. */
static int digest(PyObject *o, tj_arg *a) {
  if (tj_digest_scalar(o, a)) return 0;
  PyObject *p = PyObject_VectorcallMethod(data_ptr_str, &o, 1, NULL);
  if (p == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    a->kind = TJ_ARG_OTHER;
    return 0;
  }
  a->v.u = PyLong_AsUnsignedLongLong(p);
  Py_DECREF(p);
  if (a->v.u == (uint64_t)-1 && PyErr_Occurred()) return -1;
  a->kind = TJ_ARG_PTR;
  return 0;
}

static int pack_error(PyObject *kernel, int index, const char *fmt, const char *tyname, PyObject *o) {
  PyObject *rest = PyUnicode_FromFormat(fmt, Py_TYPE(o)->tp_name, o);
  if (rest == NULL) return -1;
  if (ArgumentError != NULL && kernel != NULL) { /* ArgumentError(kernel, message): the same on every path */
    PyObject *msg = PyUnicode_FromFormat("runtime argument %d (%s): %U", index, tyname, rest);
    PyObject *e = msg ? PyObject_CallFunctionObjArgs(ArgumentError, kernel, msg, NULL) : NULL;
    Py_XDECREF(msg);
    if (e != NULL) {
      PyErr_SetObject((PyObject *)Py_TYPE(e), e);
      Py_DECREF(e);
    }
  } else {
    PyErr_Format(PyExc_TypeError, "kernel '%S', runtime argument %d (%s): %U", kernel ? kernel : Py_None, index,
                 tyname, rest);
  }
  Py_DECREF(rest);
  return -1;
}

/* 128 bytes of a TMA descriptor (fill_tma_descriptor's bytes) into ``dst``. */
static int pack_tma(PyObject *o, void *dst, PyObject *kernel, int index) {
  Py_buffer b;
  if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE) < 0) {
    PyErr_Clear();
    return pack_error(kernel, index, "expected the 128 bytes of a CUtensorMap, got %s %R", ty_name[TY_TMA], o);
  }
  int ok = b.len == TMA_BYTES;
  if (ok) memcpy(dst, b.buf, TMA_BYTES);
  PyBuffer_Release(&b);
  return ok ? 0 : pack_error(kernel, index, "expected the 128 bytes of a CUtensorMap, got %s %R", ty_name[TY_TMA], o);
}

/* The common cases, inline: a tensor for a pointer, an int for an i32 or i64, a float for
 * an fp32 (what pack_one and pack_nogil give for them, without their calls and switches).
 * 1 where ``a`` was packed into ``dst`` (the type's size in bytes, nothing beyond), 0 for
 * anything else (the caller's full packer). */
static inline int pack_common(int ty, const tj_arg *a, unsigned char *dst) {
  if (ty == TY_PTR && a->kind == TJ_ARG_PTR) {
    memcpy(dst, &a->v.u, 8);
  } else if (ty == TY_I32 && a->kind == TJ_ARG_INT && a->v.i >= INT32_MIN && a->v.i <= INT32_MAX) {
    int32_t x = (int32_t)a->v.i;
    memcpy(dst, &x, 4);
  } else if (ty == TY_I64 && a->kind == TJ_ARG_INT) {
    memcpy(dst, &a->v.i, 8);
  } else if (ty == TY_FP32 && a->kind == TJ_ARG_FLOAT) {
    float f = (float)a->v.d;
    memcpy(dst, &f, 4);
  } else {
    return 0;
  }
  return 1;
}

/* Pack one argument of type ``ty`` into ``dst`` (the type's size in bytes, nothing beyond). */
static int pack_one(int ty, const tj_arg *a, void *dst, PyObject *kernel, int index) {
  PyObject *o = a->obj;
  if (ty == TY_TMA) return pack_error(kernel, index, "%s %R: a TMA descriptor is packed from Python only",
                                      ty_name[ty], o);
  if (ty == TY_PTR) {
    uint64_t p;
    switch (a->kind) {
      case TJ_ARG_PTR: case TJ_ARG_INT: case TJ_ARG_UINT: p = a->v.u; break;
      case TJ_ARG_NONE: p = 0; break;
      default:
        return pack_error(kernel, index, "expected a tensor (or an int address), got %s %R", ty_name[ty], o);
    }
    memcpy(dst, &p, 8);
    return 0;
  }
  if (ty >= TY_FP16) {
    double d;
    switch (a->kind) {
      case TJ_ARG_FLOAT: d = a->v.d; break;
      case TJ_ARG_INT: case TJ_ARG_BOOL: d = (double)a->v.i; break;
      case TJ_ARG_UINT: d = (double)a->v.u; break;
      default:
        d = o ? PyFloat_AsDouble(o) : -1.0;
        if (d == -1.0 && (o == NULL || PyErr_Occurred())) {
          PyErr_Clear();
          return pack_error(kernel, index, "expected a float, got %s %R", ty_name[ty], o);
        }
    }
    if (ty == TY_FP32) {
      float f = (float)d;
      memcpy(dst, &f, 4);
    } else if (ty == TY_FP64) {
      memcpy(dst, &d, 8);
    } else if (ty == TY_BF16) { /* as Triton's launcher: the high half of the fp32 */
      float f = (float)d;
      uint32_t u;
      memcpy(&u, &f, 4);
      uint16_t h = (uint16_t)(u >> 16);
      memcpy(dst, &h, 2);
    } else {
#if PY_VERSION_HEX >= 0x030B0000
      if (PyFloat_Pack2(d, (char *)dst, 1) < 0) return -1;
#else
      if (_PyFloat_Pack2(d, (unsigned char *)dst, 1) < 0) return -1;
#endif
    }
    return 0;
  }
  /* integers */
  int64_t i = 0;
  uint64_t u = 0;
  int is_unsigned_big = 0;
  switch (a->kind) {
    case TJ_ARG_INT: case TJ_ARG_BOOL: i = a->v.i; break;
    case TJ_ARG_UINT: u = a->v.u; is_unsigned_big = 1; break;
    case TJ_ARG_OTHER: {
      PyObject *n = o ? PyNumber_Index(o) : NULL;
      if (n == NULL) {
        PyErr_Clear();
        return pack_error(kernel, index, "expected an int, got %s %R", ty_name[ty], o);
      }
      tj_arg b;
      digest(n, &b);
      int r = (b.kind == TJ_ARG_INT || b.kind == TJ_ARG_UINT) ? pack_one(ty, &b, dst, kernel, index)
                                                              : pack_error(kernel, index, "%s %R is out of range for this type",
                                                                           ty_name[ty], o);
      Py_DECREF(n);
      return r;
    }
    default:
      return pack_error(kernel, index, "expected an int, got %s %R", ty_name[ty], o);
  }
  static const int64_t lo[TY_COUNT] = {0, 0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0, 0, 0, 0, 0};
  static const int64_t hi[TY_COUNT] = {0, 1, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX, 1, UINT8_MAX, UINT16_MAX,
                                       UINT32_MAX, INT64_MAX};
  if (is_unsigned_big) {
    if (ty != TY_U64) return pack_error(kernel, index, "%s %R is out of range for this type", ty_name[ty], o);
    memcpy(dst, &u, 8);
    return 0;
  }
  if (ty == TY_I1 || ty == TY_U1) i = (i != 0);
  if (i < lo[ty] || i > hi[ty]) return pack_error(kernel, index, "%s %R is out of range for this type", ty_name[ty], o);
  switch (ty_size[ty]) {
    case 1: { int8_t x = (int8_t)i; memcpy(dst, &x, 1); break; }
    case 2: { int16_t x = (int16_t)i; memcpy(dst, &x, 2); break; }
    case 4: { int32_t x = (int32_t)i; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &i, 8);
  }
  return 0;
}

static int parse_types(PyObject *codes, unsigned char *out, Py_ssize_t max, Py_ssize_t *n) {
  Py_buffer b;
  if (PyObject_GetBuffer(codes, &b, PyBUF_SIMPLE) < 0) return -1;
  if (b.len > max) {
    PyBuffer_Release(&b);
    PyErr_Format(PyExc_ValueError, "at most %zd kernel arguments are supported", max);
    return -1;
  }
  for (Py_ssize_t k = 0; k < b.len; k++) {
    unsigned char c = ((unsigned char *)b.buf)[k];
    if (c >= TY_COUNT) {
      PyBuffer_Release(&b);
      PyErr_Format(PyExc_ValueError, "unknown argument type code %d", c);
      return -1;
    }
    out[k] = c;
  }
  *n = b.len;
  PyBuffer_Release(&b);
  return 0;
}

#define MAX_ARGS 256
#define LEAF_DEPTH 8 /* tuples nested deeper launch through Python (the core's dispatcher sends none) */

/* ---- the parameter buffer ----------------------------------------------------------------
 * Every launch packs the kernel's parameters into one buffer laid out as the kernel's
 * parameter space is (the CUDA ABI: each parameter at the next multiple of its alignment,
 * its size for scalars and pointers, 64 for a CUtensorMap), the trailing scratch pointers
 * included. Where the driver confirms that layout (cuFuncGetParamInfo: every offset and
 * size, and no parameter more), the launch hands the buffer over whole (cuLaunchKernel's
 * ``extra``, CU_LAUNCH_PARAM_BUFFER_POINTER): the driver copies one block instead of
 * following one pointer per parameter, measured on an H200 at 0.2-0.4 us less per launch
 * with 60 parameters (two runs), up to 0.1 us with 21. Elsewhere (a driver before CUDA 12.4) the launch passes
 * one pointer into the buffer per parameter (kernelParams), which needs no offsets from
 * the driver. */
#define PARAM_BUF_MAX (8 * (MAX_ARGS + 2) + MAX_TMA * (TMA_BYTES + 64))

static inline size_t param_size(const unsigned char *ty, Py_ssize_t n_rt, Py_ssize_t k) {
  return k < n_rt ? (size_t)ty_size[ty[k]] : 8; /* past the runtime arguments: a scratch pointer */
}

/* Offsets of the n_rt runtime arguments and n_scratch scratch pointers; -1 where they
 * would not fit PARAM_BUF_MAX. */
static int param_layout(const unsigned char *ty, Py_ssize_t n_rt, int n_scratch, unsigned short *off, size_t *size) {
  size_t at = 0;
  for (Py_ssize_t k = 0; k < n_rt + n_scratch; k++) {
    size_t sz = param_size(ty, n_rt, k), align = k < n_rt && ty[k] == TY_TMA ? 64 : sz;
    at = (at + align - 1) / align * align;
    off[k] = (unsigned short)at;
    at += sz;
  }
  *size = at;
  return at <= PARAM_BUF_MAX ? 0 : -1;
}

/* 1 where the driver lays out fn's parameters at ``off`` with our sizes, and has no more
 * (fn's context current); 0 where it differs or cannot say. */
static int driver_agrees(CUfunction fn, const unsigned char *ty, Py_ssize_t n_rt, int n_scratch,
                         const unsigned short *off) {
  if (!param_info_resolved) {
    p_cuFuncGetParamInfo = (cuFuncGetParamInfo_t)dlsym(libcuda, "cuFuncGetParamInfo");
    param_info_resolved = 1;
  }
  if (p_cuFuncGetParamInfo == NULL) return 0;
  size_t o, z;
  for (Py_ssize_t k = 0; k < n_rt + n_scratch; k++)
    if (p_cuFuncGetParamInfo(fn, (size_t)k, &o, &z) != CUDA_SUCCESS || o != off[k] || z != param_size(ty, n_rt, k))
      return 0;
  return p_cuFuncGetParamInfo(fn, (size_t)(n_rt + n_scratch), &o, &z) != CUDA_SUCCESS;
}

/* Whether launchers made from now on hand the driver their buffer whole where it agrees
 * (1, the default), or one pointer per parameter (0: tests compare the two). */
static int g_param_buffer = 1;

/* param_buffer([enabled]) -> the setting before the call (see g_param_buffer) */
static PyObject *py_param_buffer(PyObject *self, PyObject *args) {
  int was = g_param_buffer, enabled = was;
  if (!PyArg_ParseTuple(args, "|p", &enabled)) return NULL;
  g_param_buffer = enabled;
  return PyBool_FromLong(was);
}

/* Whether launchers made from now on offer their layout to callers that pack
 * (TJ_LAUNCH_F_PACKED where pack_layout allows: 1, the default), or take tj_args only (0:
 * tests and the launch benchmark compare the two). */
static int g_packed_layouts = 1;

/* packed_layouts([enabled]) -> the setting before the call (see g_packed_layouts) */
static PyObject *py_packed_layouts(PyObject *self, PyObject *args) {
  int was = g_packed_layouts, enabled = was;
  if (!PyArg_ParseTuple(args, "|p", &enabled)) return NULL;
  g_packed_layouts = enabled;
  return PyBool_FromLong(was);
}

/* param_layout(type_codes, n_scratch) -> (offsets, size): the buffer layout a launcher of
 * these runtime argument types uses (tests compare it with the kernel's PTX). */
static PyObject *py_param_layout(PyObject *self, PyObject *args) {
  PyObject *codes;
  int n_scratch;
  if (!PyArg_ParseTuple(args, "Oi", &codes, &n_scratch)) return NULL;
  unsigned char ty[MAX_ARGS];
  Py_ssize_t n;
  if (parse_types(codes, ty, MAX_ARGS, &n) < 0) return NULL;
  if (n_scratch < 0 || n_scratch > 2) return PyErr_Format(PyExc_ValueError, "n_scratch must be 0, 1 or 2");
  unsigned short off[MAX_ARGS + 2];
  size_t size;
  if (param_layout(ty, n, n_scratch, off, &size) < 0)
    return PyErr_Format(PyExc_ValueError, "the parameters take %zu bytes, more than %d", size, PARAM_BUF_MAX);
  PyObject *offs = PyTuple_New(n + n_scratch);
  for (Py_ssize_t k = 0; offs != NULL && k < n + n_scratch; k++) PyTuple_SET_ITEM(offs, k, PyLong_FromLong(off[k]));
  return offs == NULL ? NULL : Py_BuildValue("(Nn)", offs, (Py_ssize_t)size);
}

/* digest(v) -> (kind, value): the tj_arg this launcher makes of a Python value (tests
 * compare it with the core dispatcher's). */
static PyObject *py_digest(PyObject *self, PyObject *v) {
  tj_arg a;
  if (digest(v, &a) < 0) return NULL;
  return tj_arg_describe(&a);
}

/* launch_releases_gil() -> whether a launch from this thread now releases the GIL around
 * the driver call (gil_wanted), for tests. */
static PyObject *py_launch_releases_gil(PyObject *self, PyObject *unused) { return PyBool_FromLong(gil_wanted()); }

/* pack(type_codes: bytes, values: sequence) -> list of bytes, one per argument. */
static PyObject *py_pack(PyObject *self, PyObject *args) {
  PyObject *codes, *values;
  if (!PyArg_ParseTuple(args, "OO", &codes, &values)) return NULL;
  unsigned char ty[MAX_ARGS];
  Py_ssize_t n;
  if (parse_types(codes, ty, MAX_ARGS, &n) < 0) return NULL;
  PyObject *seq = PySequence_Fast(values, "values must be a sequence");
  if (!seq) return NULL;
  if (PySequence_Fast_GET_SIZE(seq) != n) {
    Py_DECREF(seq);
    return PyErr_Format(PyExc_ValueError, "%zd type codes but %zd values", n, PySequence_Fast_GET_SIZE(seq));
  }
  PyObject *out = PyList_New(n);
  for (Py_ssize_t k = 0; out && k < n; k++) {
    tj_arg a;
    unsigned char slot[TMA_BYTES] = {0};
    int bad = ty[k] == TY_TMA ? pack_tma(PySequence_Fast_GET_ITEM(seq, k), slot, NULL, (int)k)
                              : (digest(PySequence_Fast_GET_ITEM(seq, k), &a) < 0 ||
                                 (!pack_common(ty[k], &a, slot) && pack_one(ty[k], &a, slot, NULL, (int)k) < 0));
    if (bad) {
      Py_CLEAR(out);
      break;
    }
    PyList_SET_ITEM(out, k, PyBytes_FromStringAndSize((const char *)slot, ty_size[ty[k]]));
  }
  Py_DECREF(seq);
  return out;
}

/* ---- the launcher ------------------------------------------------------------------------- */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  CUfunction fn;
  CUcontext ctx;
  int device;
  unsigned int block_x, shared, num_ctas, max_grid[3];
  int coop, pdl, nonportable;
  int n_tma;              /* TMA descriptor arguments: the Python path packs them (no C entry) */
  Py_ssize_t n_rt;        /* runtime (device) arguments, scratch excluded */
  int n_scratch;          /* trailing scratch pointers the kernel declares (0, 1 or 2) */
  uint64_t scratch_size[2], scratch_align[2];
  unsigned char ty[MAX_ARGS];
  int param_index[MAX_ARGS]; /* kernel parameter index of each runtime argument */
  unsigned short off[MAX_ARGS + 2]; /* each parameter's offset in the buffer (scratch pointers last) */
  size_t buf_size;                  /* the parameters' bytes */
  int whole;                        /* the driver takes the buffer whole (see param_layout) */
  /* where a runtime argument is an element of a tuple argument: its index at each level
     (depth levels; 0: the parameter itself). Set from ``paths``; with them the C entry
     takes tuples (TJ_LAUNCH_F_TUPLES) and reads each leaf from the TJ_ARG_TUPLE tree. */
  unsigned char depth[MAX_ARGS];
  unsigned char path[MAX_ARGS][LEAF_DEPTH];
  PyObject *name;            /* kernel name, for messages */
  char name_c[128];          /* the same, for messages made without the GIL */
  PyObject *scratch_alloc;   /* callable(nbytes, align, stream, device) -> int address */
  PyObject *scratch_free;    /* callable(address) */
  PyObject *capsule;
  PyObject *device_obj;
  tj_launch tj;
  tj_pack_slot layout[MAX_ARGS]; /* per kernel parameter, where TJ_LAUNCH_F_PACKED (pack_layout) */
} Launcher;

static int grid_fail(Launcher *L, const unsigned int g[3]) {
  PyObject *msg = PyUnicode_FromFormat(
      "grid (%u, %u, %u) exceeds the limits of CUDA device %d: x <= %u%s, y <= %u, z <= %u", g[0], g[1], g[2],
      L->device, L->max_grid[0] / L->num_ctas, L->num_ctas > 1 ? " (per CTA of the cluster)" : "", L->max_grid[1],
      L->max_grid[2]);
  if (msg == NULL) return -1;
  if (GridError == NULL) {
    PyErr_SetObject(PyExc_ValueError, msg);
  } else { /* GridError(kernel, message) adds the kernel's name */
    PyObject *e = PyObject_CallFunctionObjArgs(GridError, L->name, msg, NULL);
    if (e) {
      PyErr_SetObject((PyObject *)Py_TYPE(e), e);
      Py_DECREF(e);
    }
  }
  Py_DECREF(msg);
  return -1;
}

/* The driver call of a launch whose parameters are packed in ``buf`` (at L->off). */
static inline CUresult cu_launch(const Launcher *L, const unsigned int g[3], uint64_t stream, unsigned char *buf,
                                 const CUlaunchConfig *cfg) {
  size_t size = L->buf_size;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  void *ptrs[MAX_ARGS + 2], **params = NULL, **ex = NULL;
  if (L->whole) {
    ex = extra;
  } else {
    for (Py_ssize_t k = 0; k < L->n_rt + L->n_scratch; k++) ptrs[k] = buf + L->off[k];
    params = ptrs;
  }
  return cfg == NULL ? p_cuLaunchKernel(L->fn, g[0], g[1], g[2], L->block_x, 1, 1, L->shared,
                                        (CUstream)(uintptr_t)stream, params, ex)
                     : p_cuLaunchKernelEx(cfg, L->fn, params, ex);
}

/* Launch with the runtime arguments already packed into ``buf`` (PARAM_BUF_MAX bytes,
 * 64-aligned; the scratch pointers are written here). */
static int launch_packed(Launcher *L, const unsigned int g[3], uint64_t stream, unsigned char *buf) {
  if (g[0] == 0 || g[1] == 0 || g[2] == 0) return 0; /* nothing to run */
  if ((uint64_t)g[0] * L->num_ctas > L->max_grid[0] || g[1] > L->max_grid[1] || g[2] > L->max_grid[2])
    return grid_fail(L, g);
  uint64_t scratch[2] = {0, 0};
  int owned[2] = {0, 0};
  for (int k = 0; k < L->n_scratch; k++) {
    if (L->scratch_size[k] == 0) {
      memcpy(buf + L->off[L->n_rt + k], &scratch[k], 8);
      continue;
    }
    uint64_t nbytes = (uint64_t)g[0] * g[1] * g[2] * L->num_ctas * L->scratch_size[k];
    PyObject *p = PyObject_CallFunction(L->scratch_alloc, "KKKi", (unsigned long long)nbytes,
                                        (unsigned long long)L->scratch_align[k], (unsigned long long)stream,
                                        L->device);
    if (p == NULL) goto fail;
    scratch[k] = PyLong_AsUnsignedLongLong(p);
    Py_DECREF(p);
    if (PyErr_Occurred()) goto fail;
    owned[k] = 1;
    memcpy(buf + L->off[L->n_rt + k], &scratch[k], 8);
  }
  CUresult r;
  int pushed = 0;
  if (ctx_enter(L->ctx, &pushed) < 0) goto fail;
  const int plain = L->num_ctas == 1 && !L->coop && !L->pdl;
  CUlaunchAttribute attr[4];
  CUlaunchConfig cfg;
  if (!plain) { /* clusters, cooperative and PDL launches: cuLaunchKernelEx with attributes */
    memset(attr, 0, sizeof attr);
    unsigned int na = 0;
    if (L->pdl) {
      attr[na].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr[na++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (L->coop) {
      attr[na].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attr[na++].value.cooperative = 1;
    }
    if (L->num_ctas != 1) {
      attr[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr[na].value.clusterDim.x = L->num_ctas;
      attr[na].value.clusterDim.y = 1;
      attr[na++].value.clusterDim.z = 1;
      attr[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
      attr[na++].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
    }
    CUlaunchConfig c = {g[0] * L->num_ctas, g[1], g[2], L->block_x, 1, 1, L->shared,
                        (CUstream)(uintptr_t)stream, attr, na};
    cfg = c;
  }
  PyThreadState *released = gil_wanted() ? PyEval_SaveThread() : NULL; /* Py_BEGIN_ALLOW_THREADS, where wanted */
  r = cu_launch(L, g, stream, buf, plain ? NULL : &cfg);
  if (released != NULL) PyEval_RestoreThread(released);
  ctx_exit(pushed);
  if (r != CUDA_SUCCESS) {
    cu_fail(r, plain ? "cuLaunchKernel" : "cuLaunchKernelEx", L->name);
    goto fail;
  }
  for (int k = 0; k < 2; k++)
    if (owned[k]) {
      PyObject *x = PyObject_CallFunction(L->scratch_free, "K", (unsigned long long)scratch[k]);
      if (x == NULL) return -1;
      Py_DECREF(x);
    }
  return 0;
fail:
  for (int k = 0; k < 2; k++)
    if (owned[k]) {
      PyObject *t, *v, *tb;
      PyErr_Fetch(&t, &v, &tb);
      PyObject *x = PyObject_CallFunction(L->scratch_free, "K", (unsigned long long)scratch[k]);
      Py_XDECREF(x);
      PyErr_Restore(t, v, tb);
    }
  return -1;
}

/* The tj_arg of runtime argument ``k``: its parameter's, or the element of that
 * parameter's tuple its path names. NULL where the call has no such argument. */
static inline const tj_arg *leaf_arg(const Launcher *L, Py_ssize_t k, const tj_arg *args, Py_ssize_t nargs) {
  const int pi = L->param_index[k];
  if (pi >= nargs) return NULL;
  const tj_arg *a = &args[pi];
  for (int q = 0; q < L->depth[k]; q++) {
    if (a->kind != TJ_ARG_TUPLE || L->path[k][q] >= a->_pad) return NULL;
    a = tj_arg_element(a, L->path[k][q]);
  }
  return a;
}

/* The core's C dispatcher calls this through the capsule: args are per kernel parameter
 * (a tuple's elements under its TJ_ARG_TUPLE, where the launcher has paths). */
static int tj_launch_entry(void *self, const unsigned int grid[3], uint64_t stream, const tj_arg *args,
                           Py_ssize_t nargs) {
  Launcher *L = (Launcher *)self;
  _Alignas(64) unsigned char buf[PARAM_BUF_MAX];
  if (L->n_tma) {
    PyErr_Format(PyExc_SystemError, "kernel '%U' takes tensor descriptors: it launches through Python", L->name);
    return -1;
  }
  for (Py_ssize_t k = 0; k < L->n_rt; k++) {
    const tj_arg *a = leaf_arg(L, k, args, nargs);
    if (a == NULL) {
      PyErr_Format(PyExc_SystemError, "kernel '%U': the call has no runtime argument %zd (parameter %d%s) of %zd "
                   "parameters", L->name, k, L->param_index[k], L->depth[k] ? ", a tuple element" : "", nargs);
      return -1;
    }
    unsigned char *dst = buf + L->off[k];
    if (!pack_common(L->ty[k], a, dst) && pack_one(L->ty[k], a, dst, L->name, (int)k) < 0) return -1;
  }
  return launch_packed(L, grid, stream, buf);
}

/* Pack one argument without Python: 0, or 1 where only the Python packer can decide
 * (TJ_ARG_OTHER, fp16, a value out of the type's range: it raises the precise error). */
static int pack_nogil(int ty, const tj_arg *a, unsigned char *dst) {
  if (ty == TY_PTR) {
    uint64_t p = 0;
    if (a->kind == TJ_ARG_PTR || a->kind == TJ_ARG_INT || a->kind == TJ_ARG_UINT) p = a->v.u;
    else if (a->kind != TJ_ARG_NONE) return 1;
    memcpy(dst, &p, 8);
    return 0;
  }
  if (ty == TY_FP32 || ty == TY_FP64 || ty == TY_BF16) {
    double d;
    if (a->kind == TJ_ARG_FLOAT) d = a->v.d;
    else if (a->kind == TJ_ARG_INT || a->kind == TJ_ARG_BOOL) d = (double)a->v.i;
    else return 1;
    if (ty == TY_FP64) {
      memcpy(dst, &d, 8);
    } else {
      float f = (float)d;
      if (ty == TY_FP32) {
        memcpy(dst, &f, 4);
      } else { /* bf16: the high half of the fp32, as Triton's launcher */
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(dst, &h, 2);
      }
    }
    return 0;
  }
  if (ty == TY_FP16) return 1;
  if (ty == TY_U64 && a->kind == TJ_ARG_UINT) {
    memcpy(dst, &a->v.u, 8);
    return 0;
  }
  if (a->kind != TJ_ARG_INT && a->kind != TJ_ARG_BOOL) return 1;
  static const int64_t lo[TY_COUNT] = {0, 0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0, 0, 0, 0, 0};
  static const int64_t hi[TY_COUNT] = {0, 1, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX, 1, UINT8_MAX, UINT16_MAX,
                                       UINT32_MAX, INT64_MAX};
  int64_t i = a->v.i;
  if (ty == TY_I1 || ty == TY_U1) i = (i != 0);
  if (i < lo[ty] || i > hi[ty]) return 1;
  switch (ty_size[ty]) {
    case 1: { int8_t x = (int8_t)i; memcpy(dst, &x, 1); break; }
    case 2: { int16_t x = (int16_t)i; memcpy(dst, &x, 2); break; }
    case 4: { int32_t x = (int32_t)i; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &i, 8);
  }
  return 0;
}

/* The launch entry for callers that do not hold the GIL (tritonjit_launch.h, launch_nogil):
 * the same packing and driver call as tj_launch_entry, no Python object touched. Whatever
 * needs Python (scratch buffers, unusual arguments, a grid over the device's limits, whose
 * GridError is made by the GIL path) answers 1. */
static int launch_buffer_nogil(Launcher *L, const unsigned int grid[3], uint64_t stream, unsigned char *buf,
                               char *err, size_t errlen);

static int tj_launch_nogil(void *self, const unsigned int grid[3], uint64_t stream, const tj_arg *args,
                           Py_ssize_t nargs, char *err, size_t errlen) {
  Launcher *L = (Launcher *)self;
  _Alignas(64) unsigned char buf[PARAM_BUF_MAX];
  if (L->n_tma) return 1;
  for (Py_ssize_t k = 0; k < L->n_rt; k++) {
    const tj_arg *a = leaf_arg(L, k, args, nargs);
    if (a == NULL) return 1; /* the GIL path raises */
    unsigned char *dst = buf + L->off[k];
    if (!pack_common(L->ty[k], a, dst) && pack_nogil(L->ty[k], a, dst)) return 1;
  }
  return launch_buffer_nogil(L, grid, stream, buf, err, errlen);
}

/* The launch entries of a buffer the caller packed by L->layout (TJ_LAUNCH_F_PACKED). */
static int tj_launch_packed(void *self, const unsigned int grid[3], uint64_t stream, unsigned char *buf) {
  return launch_packed((Launcher *)self, grid, stream, buf);
}
static int tj_launch_packed_nogil(void *self, const unsigned int grid[3], uint64_t stream, unsigned char *buf,
                                  char *err, size_t errlen) {
  return launch_buffer_nogil((Launcher *)self, grid, stream, buf, err, errlen);
}

/* Launch the packed runtime arguments in ``buf`` without the GIL: 0, 1 (needs Python) or -1. */
static int launch_buffer_nogil(Launcher *L, const unsigned int grid[3], uint64_t stream, unsigned char *buf,
                               char *err, size_t errlen) {
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return 0;
  if ((uint64_t)grid[0] * L->num_ctas > L->max_grid[0] || grid[1] > L->max_grid[1] || grid[2] > L->max_grid[2])
    return 1;
  for (int k = 0; k < L->n_scratch; k++) {
    if (L->scratch_size[k] != 0) return 1;
    memset(buf + L->off[L->n_rt + k], 0, 8);
  }
  int pushed = 0;
  const char *call = "cuCtxPushCurrent";
  CUresult r = ctx_enter_raw(L->ctx, &pushed);
  if (r == CUDA_SUCCESS) {
    if (L->num_ctas == 1 && !L->coop && !L->pdl) {
      call = "cuLaunchKernel";
      r = cu_launch(L, grid, stream, buf, NULL);
    } else {
      /* clusters, cooperative and PDL launches keep to the GIL path (rare; one code path) */
      ctx_exit(pushed);
      return 1;
    }
    ctx_exit(pushed);
  }
  if (r != CUDA_SUCCESS) {
    const char *name = NULL, *text = NULL;
    if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
    if (p_cuGetErrorString) p_cuGetErrorString(r, &text);
    snprintf(err, errlen, "CUDA driver error in %s for kernel '%s': %s (%s)", call, L->name_c, name ? name : "?",
             text ? text : "");
    return -1;
  }
  return 0;
}

static int tj_current_stream(void *self, int device, uint64_t *out) {
  Launcher *L = (Launcher *)self;
  if (stream_reader != NULL && stream_reader->current_stream(C10_DEVICE_TYPE_CUDA, device, out) == 0) return 0;
  PyObject *dev = device == L->device ? (Py_INCREF(L->device_obj), L->device_obj) : PyLong_FromLong(device);
  if (dev == NULL) return -1;
  PyObject *s = PyObject_Vectorcall(raw_stream_fn, &dev, 1, NULL);
  Py_DECREF(dev);
  if (s == NULL) return -1;
  *out = PyLong_AsUnsignedLongLong(s);
  Py_DECREF(s);
  return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

static int parse_grid(PyObject *g, unsigned int out[3]) {
  if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 3) {
    PyErr_SetString(PyExc_TypeError, "grid must be a 3-tuple of ints");
    return -1;
  }
  for (int k = 0; k < 3; k++) {
    unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(g, k));
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    if (v > 0xFFFFFFFFul) {
      PyErr_Format(PyExc_OverflowError, "grid dimension %lu is too large", v);
      return -1;
    }
    out[k] = (unsigned int)v;
  }
  return 0;
}

/* launcher(grid, stream, args): the Python-level fused pack + launch. */
static PyObject *Launcher_vectorcall(PyObject *self, PyObject *const *a, size_t nargsf, PyObject *kw) {
  Launcher *L = (Launcher *)self;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n != 3 || kw) return PyErr_Format(PyExc_TypeError, "launcher(grid, stream, args) takes 3 positional arguments");
  unsigned int g[3];
  if (parse_grid(a[0], g) < 0) return NULL;
  uint64_t stream = PyLong_AsUnsignedLongLong(a[1]);
  if (stream == (uint64_t)-1 && PyErr_Occurred()) return NULL;
  PyObject *seq = PySequence_Fast(a[2], "args must be a sequence");
  if (!seq) return NULL;
  if (PySequence_Fast_GET_SIZE(seq) != L->n_rt) {
    PyErr_Format(PyExc_TypeError, "kernel '%U' takes %zd runtime arguments, got %zd", L->name, L->n_rt,
                 PySequence_Fast_GET_SIZE(seq));
    Py_DECREF(seq);
    return NULL;
  }
  _Alignas(64) unsigned char buf[PARAM_BUF_MAX];
  for (Py_ssize_t k = 0; k < L->n_rt; k++) {
    tj_arg arg;
    unsigned char *dst = buf + L->off[k];
    if (L->ty[k] == TY_TMA) {
      if (pack_tma(PySequence_Fast_GET_ITEM(seq, k), dst, L->name, (int)k) < 0) {
        Py_DECREF(seq);
        return NULL;
      }
    } else if (digest(PySequence_Fast_GET_ITEM(seq, k), &arg) < 0 ||
               pack_one(L->ty[k], &arg, dst, L->name, (int)k) < 0) {
      Py_DECREF(seq);
      return NULL;
    }
  }
  int r = launch_packed(L, g, stream, buf);
  Py_DECREF(seq);
  if (r < 0) return NULL;
  Py_RETURN_NONE;
}

/* launcher.launch_packed(grid, stream, packed: list of bytes from pack()) */
static PyObject *Launcher_launch_packed(PyObject *self, PyObject *args) {
  Launcher *L = (Launcher *)self;
  PyObject *grid, *packed;
  unsigned long long stream;
  if (!PyArg_ParseTuple(args, "OKO!", &grid, &stream, &PyList_Type, &packed)) return NULL;
  unsigned int g[3];
  if (parse_grid(grid, g) < 0) return NULL;
  if (PyList_GET_SIZE(packed) != L->n_rt)
    return PyErr_Format(PyExc_TypeError, "kernel '%U': %zd packed arguments, expected %zd", L->name,
                        PyList_GET_SIZE(packed), L->n_rt);
  _Alignas(64) unsigned char buf[PARAM_BUF_MAX];
  for (Py_ssize_t k = 0; k < L->n_rt; k++) {
    PyObject *b = PyList_GET_ITEM(packed, k);
    if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) != ty_size[L->ty[k]])
      return PyErr_Format(PyExc_TypeError, "packed argument %zd must be %d bytes", k, ty_size[L->ty[k]]);
    memcpy(buf + L->off[k], PyBytes_AS_STRING(b), ty_size[L->ty[k]]);
  }
  if (launch_packed(L, g, stream, buf) < 0) return NULL;
  Py_RETURN_NONE;
}

static void capsule_destructor(PyObject *cap) {
  Launcher *L = (Launcher *)PyCapsule_GetContext(cap);
  Py_XDECREF(L);
}

static PyObject *Launcher_get_capsule(PyObject *self, void *closure) {
  Launcher *L = (Launcher *)self;
  if (L->capsule == NULL) {
    /* The capsule holds a reference to the launcher; the launcher does not hold the
       capsule strongly after handing it out, so there is no cycle. */
    PyObject *cap = PyCapsule_New(&L->tj, TJ_LAUNCH_CAPSULE, capsule_destructor);
    if (!cap) return NULL;
    Py_INCREF(self);
    PyCapsule_SetContext(cap, self);
    return cap;
  }
  Py_INCREF(L->capsule);
  return L->capsule;
}

static PyObject *Launcher_get_info(PyObject *self, void *closure) {
  Launcher *L = (Launcher *)self;
  PyObject *types = PyBytes_FromStringAndSize((const char *)L->ty, L->n_rt);
  return Py_BuildValue("{s:O,s:i,s:I,s:I,s:I,s:i,s:i,s:N,s:i,s:n,s:O,s:O}", "name", L->name, "device", L->device,
                       "block_x", L->block_x, "shared", L->shared, "num_ctas", L->num_ctas, "cooperative", L->coop,
                       "pdl", L->pdl, "types", types, "n_scratch", L->n_scratch, "param_bytes",
                       (Py_ssize_t)L->buf_size, "param_buffer", L->whole ? Py_True : Py_False, "packed",
                       (L->tj.flags & TJ_LAUNCH_F_PACKED) ? Py_True : Py_False);
}

/* ``paths``: None, or per runtime argument the index path of its tuple element (an empty
 * tuple for a plain parameter). Sets L->depth and L->path; *tuples becomes 0 where a
 * path is too deep or an index too large for them (such calls launch through Python). */
static int set_paths(Launcher *L, PyObject *paths, int *tuples) {
  memset(L->depth, 0, sizeof L->depth);
  if (paths == Py_None) return 0;
  PyObject *seq = PySequence_Fast(paths, "paths must be a sequence of index tuples");
  if (!seq) return -1;
  if (PySequence_Fast_GET_SIZE(seq) != L->n_rt) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "paths and types differ in length");
    return -1;
  }
  for (Py_ssize_t k = 0; k < L->n_rt && *tuples; k++) {
    PyObject *p = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, k), "each path must be a sequence of ints");
    if (!p) {
      Py_DECREF(seq);
      return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(p);
    if (n > LEAF_DEPTH) *tuples = 0;
    for (Py_ssize_t q = 0; q < n && *tuples; q++) {
      long i = PyLong_AsLong(PySequence_Fast_GET_ITEM(p, q));
      if (i == -1 && PyErr_Occurred()) {
        Py_DECREF(p);
        Py_DECREF(seq);
        return -1;
      }
      if (i < 0 || i > 255) *tuples = 0;
      L->path[k][q] = (unsigned char)i;
    }
    L->depth[k] = (unsigned char)(*tuples ? n : 0);
    Py_DECREF(p);
  }
  Py_DECREF(seq);
  if (!*tuples) memset(L->depth, 0, sizeof L->depth);
  return 0;
}

/* L->layout for callers that pack (TJ_LAUNCH_F_PACKED): 1 where every runtime argument
 * is a plain parameter of a type tj_pack_code names and the buffer has room for the
 * spill and the skipped parameters' slot, else 0 (the caller hands tj_args over). */
static int pack_layout(Launcher *L, int has_tuples) {
  static const signed char code_of[TY_COUNT] = {
      [TY_PTR] = TJ_PACK_PTR, [TY_I1] = TJ_PACK_B8,  [TY_I8] = -1,   [TY_I16] = -1,  [TY_I32] = TJ_PACK_I32,
      [TY_I64] = TJ_PACK_I64, [TY_U1] = TJ_PACK_B8,  [TY_U8] = -1,   [TY_U16] = -1,  [TY_U32] = -1,
      [TY_U64] = TJ_PACK_U64, [TY_FP16] = -1,        [TY_BF16] = -1, [TY_FP32] = TJ_PACK_FP32,
      [TY_FP64] = TJ_PACK_FP64, [TY_TMA] = -1};
  const size_t sink = (L->buf_size + 7) / 8 * 8 + 8; /* past the parameters and the last spill */
  if (has_tuples || L->n_tma || sink + 16 > TJ_PACK_BUF_MAX) return 0;
  for (int p = 0; p < MAX_ARGS; p++) L->layout[p] = (tj_pack_slot){(uint16_t)sink, TJ_PACK_SKIP, 0};
  for (Py_ssize_t k = 0; k < L->n_rt; k++) {
    const int p = L->param_index[k];
    if (code_of[L->ty[k]] < 0 || p < 0 || p >= MAX_ARGS || (k > 0 && p <= L->param_index[k - 1])) return 0;
    L->layout[p] = (tj_pack_slot){L->off[k], (uint8_t)code_of[L->ty[k]], 0};
  }
  return 1;
}

static int Launcher_init(PyObject *self, PyObject *args, PyObject *kwds) {
  Launcher *L = (Launcher *)self;
  static char *kwlist[] = {"name", "function", "context", "device", "num_warps", "shared", "num_ctas",
                           "cooperative", "pdl", "types", "param_index", "n_scratch", "scratch",
                           "max_grid", "scratch_alloc", "scratch_free", "paths", NULL};
  unsigned long long fn, ctx;
  int device, num_warps, shared, num_ctas, coop, pdl, n_scratch;
  PyObject *name, *types, *pindex, *scratch, *max_grid, *salloc, *sfree, *paths = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "UKKiiiippOOiOOOO|O", kwlist, &name, &fn, &ctx, &device, &num_warps,
                                   &shared, &num_ctas, &coop, &pdl, &types, &pindex, &n_scratch, &scratch,
                                   &max_grid, &salloc, &sfree, &paths))
    return -1;
  if (ensure_libcuda() < 0) return -1;
  if (parse_types(types, L->ty, MAX_ARGS, &L->n_rt) < 0) return -1;
  L->n_tma = 0;
  for (Py_ssize_t k = 0; k < L->n_rt; k++) L->n_tma += L->ty[k] == TY_TMA;
  if (L->n_tma > MAX_TMA) {
    PyErr_Format(PyExc_ValueError, "at most %d tensor-descriptor (TMA) arguments are supported", MAX_TMA);
    return -1;
  }
  PyObject *pi = PySequence_Fast(pindex, "param_index must be a sequence");
  if (!pi) return -1;
  if (PySequence_Fast_GET_SIZE(pi) != L->n_rt) {
    Py_DECREF(pi);
    PyErr_SetString(PyExc_ValueError, "param_index and types differ in length");
    return -1;
  }
  for (Py_ssize_t k = 0; k < L->n_rt; k++) L->param_index[k] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(pi, k));
  Py_DECREF(pi);
  int tuples = paths != Py_None && L->n_tma == 0;
  if (set_paths(L, paths, &tuples) < 0) return -1;
  if (n_scratch < 0 || n_scratch > 2) {
    PyErr_SetString(PyExc_ValueError, "n_scratch must be 0, 1 or 2");
    return -1;
  }
  if (!PyArg_ParseTuple(scratch, "KKKK", &L->scratch_size[0], &L->scratch_align[0], &L->scratch_size[1],
                        &L->scratch_align[1]))
    return -1;
  if (!PyArg_ParseTuple(max_grid, "III", &L->max_grid[0], &L->max_grid[1], &L->max_grid[2])) return -1;
  if (PyErr_Occurred()) return -1;
  L->fn = (CUfunction)(uintptr_t)fn;
  L->ctx = (CUcontext)(uintptr_t)ctx;
  L->device = device;
  if (param_layout(L->ty, L->n_rt, n_scratch, L->off, &L->buf_size) < 0) {
    PyErr_Format(PyExc_ValueError, "kernel '%U': its parameters take %zu bytes, more than %d", name, L->buf_size,
                 PARAM_BUF_MAX);
    return -1;
  }
  {
    int pushed = 0;
    if (ctx_enter(L->ctx, &pushed) < 0) return -1;
    L->whole = g_param_buffer && L->buf_size > 0 && driver_agrees(L->fn, L->ty, L->n_rt, n_scratch, L->off);
    ctx_exit(pushed);
  }
  L->block_x = 32u * (unsigned)num_warps;
  L->shared = (unsigned)shared;
  L->num_ctas = num_ctas < 1 ? 1 : (unsigned)num_ctas;
  L->coop = coop;
  L->pdl = pdl;
  L->n_scratch = n_scratch;
  Py_INCREF(name);
  Py_XSETREF(L->name, name);
  Py_INCREF(salloc);
  Py_XSETREF(L->scratch_alloc, salloc);
  Py_INCREF(sfree);
  Py_XSETREF(L->scratch_free, sfree);
  Py_XSETREF(L->device_obj, PyLong_FromLong(device));
  {
    const char *u = PyUnicode_AsUTF8(name);
    if (u == NULL) return -1;
    snprintf(L->name_c, sizeof L->name_c, "%s", u);
  }
  L->tj.abi = TJ_LAUNCH_ABI;
  L->tj.flags = TJ_LAUNCH_F_NOGIL | (tuples ? TJ_LAUNCH_F_TUPLES : 0u);
  L->tj.self = L;
  L->tj.launch = tj_launch_entry;
  L->tj.launch_nogil = tj_launch_nogil;
  L->tj.current_stream = raw_stream_fn ? tj_current_stream : NULL;
  int has_tuples = paths != Py_None && !tuples; /* paths too deep for the C entry: not known to be plain */
  for (Py_ssize_t k = 0; k < L->n_rt; k++) has_tuples |= L->depth[k] != 0;
  if (g_packed_layouts && pack_layout(L, has_tuples)) {
    L->tj.flags |= TJ_LAUNCH_F_PACKED;
    L->tj.layout = L->layout;
    L->tj.n_layout = MAX_ARGS;
    L->tj.launch_packed = tj_launch_packed;
    L->tj.launch_packed_nogil = tj_launch_packed_nogil;
  }
  L->vectorcall = Launcher_vectorcall;
  return 0;
}

static void Launcher_dealloc(PyObject *self) {
  Launcher *L = (Launcher *)self;
  Py_XDECREF(L->name);
  Py_XDECREF(L->scratch_alloc);
  Py_XDECREF(L->scratch_free);
  Py_XDECREF(L->capsule);
  Py_XDECREF(L->device_obj);
  Py_TYPE(self)->tp_free(self);
}

static PyMethodDef Launcher_methods[] = {
    {"launch_packed", Launcher_launch_packed, METH_VARARGS, "launch_packed(grid, stream, packed)"},
    {NULL}};
static PyGetSetDef Launcher_getset[] = {
    {"tritonjit_launch", Launcher_get_capsule, NULL, "capsule of the native launch entry (tritonjit_launch.h)"},
    {"info", Launcher_get_info, NULL, "launch configuration, for tests and debugging"},
    {NULL}};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tritonjit_cuda._driver.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = PyType_GenericNew,
    .tp_init = Launcher_init,
    .tp_dealloc = Launcher_dealloc,
    .tp_methods = Launcher_methods,
    .tp_getset = Launcher_getset,
    .tp_doc = "Fused pack + launch of one variant on one device.",
};

/* set_hooks(GridError, ArgumentError, raw_stream_fn or None) */
static PyObject *py_set_hooks(PyObject *self, PyObject *args) {
  PyObject *ge, *ae, *rs;
  if (!PyArg_ParseTuple(args, "OOO", &ge, &ae, &rs)) return NULL;
  Py_INCREF(ge);
  Py_XSETREF(GridError, ge);
  Py_INCREF(ae);
  Py_XSETREF(ArgumentError, ae);
  if (rs == Py_None) {
    Py_CLEAR(raw_stream_fn);
  } else {
    Py_INCREF(rs);
    Py_XSETREF(raw_stream_fn, rs);
  }
  Py_RETURN_NONE;
}

/* set_stream_reader(capsule or None): the core's tensor-reader capsule; its
 * current_stream answers torch's current stream in C (else raw_stream_fn is called). */
static PyObject *py_set_stream_reader(PyObject *self, PyObject *cap) {
  if (cap == Py_None) {
    stream_reader = NULL;
    Py_CLEAR(stream_reader_capsule);
    Py_RETURN_NONE;
  }
  const tj_tensor_reader *r = PyCapsule_GetPointer(cap, TJ_TENSOR_READER_CAPSULE);
  if (r == NULL) return NULL;
  if (r->abi != TJ_TENSOR_READER_ABI || r->current_stream == NULL)
    return PyErr_Format(PyExc_ValueError, "tensor reader ABI %d, expected %d", r->abi, TJ_TENSOR_READER_ABI);
  Py_INCREF(cap);
  Py_XSETREF(stream_reader_capsule, cap);
  stream_reader = r;
  Py_RETURN_NONE;
}

/* fill_tma_descriptor(address, swizzle, elem_size, elem_type, block_shape, shape, strides, padding)
 * -> bytes: the CUtensorMap of a host tensor descriptor, as Triton's driver.c fills it
 * (dimensions innermost first, byte strides of all but the innermost, element strides 1,
 * no interleave, L2 promotion 128B, NaN fill when padding is 1). */
static PyObject *py_fill_tma_descriptor(PyObject *self, PyObject *args) {
  unsigned long long address;
  int swizzle, elem_size, elem_type, padding;
  PyObject *block, *shape, *strides;
  if (!PyArg_ParseTuple(args, "KiiiOOOi", &address, &swizzle, &elem_size, &elem_type, &block, &shape, &strides,
                        &padding))
    return NULL;
  if (ensure_libcuda() < 0) return NULL;
  if (p_cuTensorMapEncodeTiled == NULL) {
    p_cuTensorMapEncodeTiled = (cuTensorMapEncodeTiled_t)dlsym(libcuda, "cuTensorMapEncodeTiled");
    if (p_cuTensorMapEncodeTiled == NULL)
      return PyErr_Format(PyExc_RuntimeError, "libcuda.so.1 lacks cuTensorMapEncodeTiled (a CUDA 12 driver is "
                          "needed for tensor descriptors)");
  }
  PyObject *seqs[3] = {PySequence_Fast(block, "block_shape must be a sequence"), NULL, NULL};
  if (seqs[0]) seqs[1] = PySequence_Fast(shape, "shape must be a sequence");
  if (seqs[1]) seqs[2] = PySequence_Fast(strides, "strides must be a sequence");
  PyObject *out = NULL;
  unsigned int box[5], elem_strides[5] = {1, 1, 1, 1, 1};
  uint64_t dims[5], byte_strides[5];
  Py_ssize_t rank = seqs[2] ? PySequence_Fast_GET_SIZE(seqs[0]) : 0;
  if (seqs[2] == NULL) goto done;
  if (rank < 1 || rank > 5 || PySequence_Fast_GET_SIZE(seqs[1]) != rank || PySequence_Fast_GET_SIZE(seqs[2]) != rank) {
    PyErr_SetString(PyExc_ValueError, "block_shape, shape and strides must have one rank, 1 to 5");
    goto done;
  }
  for (Py_ssize_t i = 0; i < rank; i++) {
    box[rank - 1 - i] = (unsigned int)PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seqs[0], i));
    dims[rank - 1 - i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seqs[1], i));
    if (i + 1 < rank)
      byte_strides[rank - 2 - i] = (uint64_t)elem_size * PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seqs[2], i));
  }
  if (PyErr_Occurred()) goto done;
  byte_strides[rank - 1] = dims[rank - 1] * (rank == 1 ? (uint64_t)elem_size : byte_strides[rank - 2]);
  _Alignas(64) unsigned char map[TMA_BYTES];
  memset(map, 0, sizeof map);
  CUresult r = p_cuTensorMapEncodeTiled(map, elem_type, (unsigned int)rank, (void *)(uintptr_t)address, dims,
                                        byte_strides, box, elem_strides, 0 /* interleave none */, swizzle,
                                        2 /* L2 promotion 128B */, padding == 1 ? 1 : 0 /* NaN fill */);
  if (r != CUDA_SUCCESS) {
    cu_fail(r, "cuTensorMapEncodeTiled", NULL);
    goto done;
  }
  out = PyBytes_FromStringAndSize((const char *)map, TMA_BYTES);
done:
  for (int k = 0; k < 3; k++) Py_XDECREF(seqs[k]);
  return out;
}

static PyMethodDef module_methods[] = {
    {"set_stream_reader", py_set_stream_reader, METH_O, "set_stream_reader(capsule or None)"},
    {"probe", py_probe, METH_NOARGS, "probe() -> (ok, reason)"},
    {"device_props", py_device_props, METH_O, "device_props(device) -> dict"},
    {"load_binary", py_load_binary, METH_VARARGS, "load_binary(name, cubin, device) -> handles and attributes"},
    {"set_dynamic_shared", py_set_dynamic_shared, METH_VARARGS, "set_dynamic_shared(function, device, bytes)"},
    {"allow_nonportable_cluster", py_allow_nonportable_cluster, METH_VARARGS, "(function, device)"},
    {"is_capturing", py_is_capturing, METH_O, "is_capturing(stream) -> bool"},
    {"pack", py_pack, METH_VARARGS, "pack(type_codes, values) -> [bytes]"},
    {"param_layout", py_param_layout, METH_VARARGS,
     "param_layout(type_codes, n_scratch) -> (offsets, size): where a launch packs each kernel parameter"},
    {"packed_layouts", py_packed_layouts, METH_VARARGS,
     "packed_layouts([enabled]) -> bool: whether launchers made from now on take buffers their callers pack "
     "(TJ_LAUNCH_F_PACKED); returns the previous setting"},
    {"param_buffer", py_param_buffer, METH_VARARGS,
     "param_buffer([enabled]) -> the previous setting: whether launchers made from now on hand the driver one "
     "parameter buffer where it agrees with the layout (else a pointer per parameter); for tests"},
    {"digest", py_digest, METH_O, "digest(value) -> (kind, value) as the launcher reads it"},
    {"launch_releases_gil", py_launch_releases_gil, METH_NOARGS,
     "launch_releases_gil() -> whether a launch from this thread now releases the GIL (another thread may want it)"},
    {"fill_tma_descriptor", py_fill_tma_descriptor, METH_VARARGS,
     "fill_tma_descriptor(address, swizzle, elem_size, elem_type, block_shape, shape, strides, padding) -> bytes"},
    {"set_hooks", py_set_hooks, METH_VARARGS, "set_hooks(GridError, ArgumentError, raw_stream_fn)"},
    {NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_driver", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__driver(void) {
  data_ptr_str = PyUnicode_InternFromString("data_ptr");
  if (!data_ptr_str || PyType_Ready(&LauncherType) < 0) return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m) return NULL;
  Py_INCREF(&LauncherType);
  PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType);
  PyModule_AddIntConstant(m, "MAX_ARGS", MAX_ARGS);
  /* the launch ABI this extension was built for (its copy of tritonjit_launch.h); the
   * plugin declares it to the core, which refuses a mismatch at registration */
  PyModule_AddIntConstant(m, "LAUNCH_ABI", TJ_LAUNCH_ABI);
  PyModule_AddStringConstant(m, "LAUNCH_CAPSULE", TJ_LAUNCH_CAPSULE);
  PyObject *names = PyTuple_New(TY_COUNT);
  for (int k = 0; k < TY_COUNT; k++) PyTuple_SET_ITEM(names, k, PyUnicode_FromString(k ? ty_name[k] : "*"));
  PyModule_AddObject(m, "TYPE_NAMES", names);
  PyObject *sizes = PyTuple_New(TY_COUNT);
  for (int k = 0; k < TY_COUNT; k++) PyTuple_SET_ITEM(sizes, k, PyLong_FromLong(ty_size[k]));
  PyModule_AddObject(m, "TYPE_SIZES", sizes);
  return m;
}
