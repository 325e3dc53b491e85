// The physical floor of host-side launch cost: a tight C loop of cuLaunchKernel on
// a cubin that Triton produced, with exactly the argument list that kernel takes.
//
// Built as a shared library by launch_overhead.py and called through ctypes in the
// same process, on the same context and stream as the Python paths it is compared
// with, so its rounds interleave with theirs (a shared host's noise then hits all
// paths alike). The loop itself runs entirely in C: ctypes is entered once per round.
// One floor per kernel: each loads its own module from the cubin.
//
//   floor_setup(&floor, image, name, shared, num_warps, nargs, values, sizes)
//     -> 0, or a CUresult. The kernel's device parameters, in order: values[k] holds
//     parameter k in its low sizes[k] bytes (little-endian: a pointer or an i64 in 8,
//     an i32 or an fp32's bits in 4, a bool in 1), packed once in Python from
//     Triton's signature of the compiled kernel and the call's arguments, Triton's
//     trailing scratch pointers included. Each value gets its own 8-byte slot and
//     the launch passes a pointer to each slot, as Triton's launcher does.
//   floor_param_sizes(floor, max, sizes) -> how many parameters the driver says the
//     kernel takes (cuFuncGetParamInfo, CUDA 12.4+), their sizes written to sizes;
//     -1 where the driver lacks that call. The caller compares them with its own.
//   floor_run(floor, stream, iters) -> microseconds per launch (iters launches of
//     grid (1, 1, 1), then one cuStreamSynchronize), or a negative CUresult.
//   floor_run_buffer(floor, stream, iters) -> the same with the parameters handed over
//     as one buffer laid out as the driver says (cuFuncGetParamInfo; cuLaunchKernel's
//     ``extra``, CU_LAUNCH_PARAM_BUFFER_POINTER), as tritonjit's CUDA launcher hands
//     them where the driver agrees with its layout; -1e9 where the driver cannot say.
//   floor_free(floor)
//   floor_python(floor, stream, tp_call, steps, reader) -> a new Python callable (call
//     through ctypes.PyDLL, which holds the GIL) whose every call, whatever its arguments,
//     makes the floor's one cuLaunchKernel and returns None: the least any launcher called
//     from Python can cost, Python's own call of those arguments included. tp_call: taken
//     through tp_call (for a call site of more than 30 arguments, which CPython compiles to
//     a tuple and a dict: through vectorcall it would copy them first), else vectorcall.
//     steps (PF_* bits, 0 for none) adds a launcher's own steps one by one, for diag rows;
//     reader: tritonjit's tensor reader (its capsule's pointer) for PF_READ and PF_STREAM,
//     or NULL. The floor must outlive it.
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  CUmodule mod;
  CUfunction fn;
  unsigned shared, threads;
  int nargs;
  unsigned long long *store; /* one 8-byte slot per parameter */
  void **args;               /* &store[k] */
  unsigned char *buf;        /* the parameters at the driver's offsets (NULL: not known) */
  size_t buf_size;
} floor_t;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

void floor_free(floor_t *f) {
  if (f == NULL) return;
  if (f->mod != NULL) cuModuleUnload(f->mod);
  free(f->store);
  free(f->args);
  free(f->buf);
  free(f);
}

int floor_setup(floor_t **out, const void *image, const char *name, unsigned shared, int num_warps, int nargs,
                const unsigned long long *values, const unsigned *sizes) {
  CUresult r;
  CUcontext ctx;
  *out = NULL;
  if (nargs < 0) return CUDA_ERROR_INVALID_VALUE;
  if ((r = cuCtxGetCurrent(&ctx)) != CUDA_SUCCESS) return r;
  if (ctx == NULL) return CUDA_ERROR_INVALID_CONTEXT; /* the caller's torch made one current */
  floor_t *f = (floor_t *)calloc(1, sizeof(floor_t));
  if (f == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  f->store = (unsigned long long *)calloc(nargs > 0 ? nargs : 1, sizeof(unsigned long long));
  f->args = (void **)calloc(nargs > 0 ? nargs : 1, sizeof(void *));
  if (f->store == NULL || f->args == NULL) {
    floor_free(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (int k = 0; k < nargs; k++) {
    if (sizes[k] == 0 || sizes[k] > 8) {
      floor_free(f);
      return CUDA_ERROR_INVALID_VALUE;
    }
    f->store[k] = values[k];
    f->args[k] = &f->store[k];
  }
  f->nargs = nargs;
  if ((r = cuModuleLoadData(&f->mod, image)) != CUDA_SUCCESS || (r = cuModuleGetFunction(&f->fn, f->mod, name)) != CUDA_SUCCESS) {
    floor_free(f);
    return r;
  }
  f->shared = shared;
  f->threads = 32u * (unsigned)num_warps;
  *out = f;
  return 0;
}

typedef CUresult (*param_info_t)(CUfunction, size_t, size_t *, size_t *);

static param_info_t param_info(void) {
  /* looked up at run time: a driver older than CUDA 12.4 lacks it (the library loads anyway) */
  void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  param_info_t info = (param_info_t)dlsym(cuda != NULL ? cuda : RTLD_DEFAULT, "cuFuncGetParamInfo");
  if (cuda != NULL) dlclose(cuda);
  return info;
}

int floor_param_sizes(const floor_t *f, int max, unsigned *sizes) {
  param_info_t info = param_info();
  if (info == NULL) return -1;
  int n = 0;
  for (;; n++) {
    size_t offset = 0, size = 0;
    if (info(f->fn, (size_t)n, &offset, &size) != CUDA_SUCCESS) break;
    if (n < max) sizes[n] = (unsigned)size;
  }
  return n;
}

/* f->buf from f->store at the driver's offsets; 0, or -1 where the driver cannot say */
static int fill_buffer(floor_t *f) {
  param_info_t info = param_info();
  if (info == NULL || f->nargs == 0) return -1;
  size_t end = 0, offset, size;
  for (int k = 0; k < f->nargs; k++) {
    if (info(f->fn, (size_t)k, &offset, &size) != CUDA_SUCCESS) return -1;
    if (offset + size > end) end = offset + size;
  }
  f->buf = (unsigned char *)calloc(end, 1);
  if (f->buf == NULL) return -1;
  for (int k = 0; k < f->nargs; k++) {
    info(f->fn, (size_t)k, &offset, &size);
    memcpy(f->buf + offset, &f->store[k], size); /* little-endian: the low bytes */
  }
  f->buf_size = end;
  return 0;
}

double floor_run_buffer(floor_t *f, CUstream s, int iters) {
  CUresult r;
  if (f->buf == NULL && fill_buffer(f) < 0) return -1e9;
  size_t size = f->buf_size;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, f->buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  double t0 = now();
  for (int i = 0; i < iters; i++)
    if ((r = cuLaunchKernel(f->fn, 1, 1, 1, f->threads, 1, 1, f->shared, s, NULL, extra)) != CUDA_SUCCESS)
      return -(double)r;
  if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS) return -(double)r;
  return (now() - t0) / iters * 1e6;
}

double floor_run(const floor_t *f, CUstream s, int iters) {
  CUresult r;
  double t0 = now();
  for (int i = 0; i < iters; i++)
    if ((r = cuLaunchKernel(f->fn, 1, 1, 1, f->threads, 1, 1, f->shared, s, f->args, NULL)) != CUDA_SUCCESS)
      return -(double)r;
  if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS) return -(double)r;
  return (now() - t0) / iters * 1e6;
}

/* ---- the floor called from Python ------------------------------------------------------ */
/* Steps a launcher adds to the driver call, each on its own for diag rows (PF_*: bits of
 * ``steps``), so that what each costs between driver calls, called from Python, is timed
 * apart: */
#define PF_CTX 1    /* cuCtxGetCurrent first, as a launcher checks its context */
#define PF_GIL 2    /* whether another Python thread may want the GIL (a thread-state walk) */
#define PF_READ 4   /* each tensor argument read through tritonjit's tensor reader */
#define PF_STREAM 8 /* torch's current stream, through the same reader */
#define PF_EXTRA 16 /* the parameters as one buffer (cuLaunchKernel's extra) */

/* tritonjit's tensor-reader ABI (tritonjit_tensor.h, version 1), as far as used here */
typedef struct {
  int abi;
  int (*read)(PyObject *v, unsigned long long *ptr, PyObject **dtype, int *device);
  int (*current_stream)(int device_type, int device, unsigned long long *out);
} reader_t;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  floor_t *f;
  CUstream s;
  int steps;
  const reader_t *reader;
} python_floor_t;

static PyObject *python_floor_launch(python_floor_t *p, PyObject *const *args, Py_ssize_t nargs) {
  floor_t *f = p->f;
  CUstream s = p->s;
  volatile unsigned long long sink = 0;
  if (p->steps & PF_CTX) {
    CUcontext cur = NULL;
    cuCtxGetCurrent(&cur);
    sink += (unsigned long long)(uintptr_t)cur;
  }
  if (p->steps & PF_GIL) {
    PyThreadState *ts = PyThreadState_Get();
    PyInterpreterState *is = PyThreadState_GetInterpreter(ts);
    sink += PyThreadState_Next(ts) != NULL || PyInterpreterState_ThreadHead(is) != ts ||
            PyInterpreterState_Head() != is || PyInterpreterState_Next(is) != NULL;
  }
  if ((p->steps & PF_READ) && p->reader != NULL) {
    for (Py_ssize_t i = 0; i < nargs; i++) {
      PyObject *v = args[i];
      if (PyLong_CheckExact(v) || PyFloat_CheckExact(v) || v == Py_None || PyBool_Check(v)) continue;
      unsigned long long ptr = 0;
      PyObject *dtype = NULL;
      int dev = -1;
      if (p->reader->read(v, &ptr, &dtype, &dev) == 0) sink += ptr + (unsigned long long)dev;
    }
  }
  if ((p->steps & PF_STREAM) && p->reader != NULL) {
    unsigned long long cs = 0;
    if (p->reader->current_stream(1, 0, &cs) == 0) sink += cs;
  }
  CUresult r;
  if ((p->steps & PF_EXTRA) && (f->buf != NULL || fill_buffer(f) == 0)) {
    size_t size = f->buf_size;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, f->buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    r = cuLaunchKernel(f->fn, 1, 1, 1, f->threads, 1, 1, f->shared, s, NULL, extra);
  } else {
    r = cuLaunchKernel(f->fn, 1, 1, 1, f->threads, 1, 1, f->shared, s, f->args, NULL);
  }
  (void)sink;
  if (r != CUDA_SUCCESS) return PyErr_Format(PyExc_RuntimeError, "floor: cuLaunchKernel failed with CUresult %d", (int)r);
  Py_RETURN_NONE;
}
/* a call site of up to 30 arguments comes here (vectorcall) ... */
static PyObject *python_floor_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  (void)kwnames;
  return python_floor_launch((python_floor_t *)self, args, PyVectorcall_NARGS(nargsf));
}
/* ... a larger one here, where vectorcall is NULL (CPython calls tp_call with its tuple and dict) */
static PyObject *python_floor_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)kwargs;
  return python_floor_launch((python_floor_t *)self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args));
}
static void python_floor_dealloc(PyObject *self) { PyObject_Free(self); }

static PyTypeObject python_floor_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launch_floor.PythonFloor",
    .tp_basicsize = sizeof(python_floor_t),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(python_floor_t, vectorcall),
    .tp_call = python_floor_call,
    .tp_dealloc = python_floor_dealloc,
};

PyObject *floor_python(floor_t *f, CUstream s, int tp_call, int steps, const void *reader) {
  if (!(python_floor_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&python_floor_type) < 0) return NULL;
  python_floor_t *p = PyObject_New(python_floor_t, &python_floor_type);
  if (p == NULL) return NULL;
  p->vectorcall = tp_call ? NULL : python_floor_vectorcall;
  p->f = f;
  p->s = s;
  p->steps = steps;
  p->reader = (const reader_t *)reader;
  return (PyObject *)p;
}
