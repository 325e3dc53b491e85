// The physical floor of host-side launch cost: a tight C loop of cuLaunchKernel on
// a cubin that Triton produced, with the same arguments a Python call passes.
//
// Built as a shared library by launch_overhead.py and called through ctypes in the
// same process, on the same context and stream as the Python paths it is compared
// with, so its rounds interleave with theirs (a shared host's noise then hits all
// paths alike). The loop itself runs entirely in C: ctypes is entered once per round.
//
//   floor_setup(image, size, name, shared, num_warps, argspec) -> 0, or a CUresult
//     argspec: one letter per kernel parameter: p (a device pointer to 64 KiB),
//     i (int32 = 1000), s (a null scratch pointer).
//   floor_run(stream, iters) -> microseconds per launch (iters launches, then one
//     cuStreamSynchronize), or a negative CUresult.
#include <cuda.h>
#include <string.h>
#include <time.h>

static CUfunction g_fn;
static unsigned g_shared, g_threads;
static unsigned long long g_store[64];
static void *g_args[64];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int floor_setup(const void *image, size_t size, const char *name, unsigned shared, int num_warps, const char *spec) {
  (void)size;
  CUresult r;
  CUcontext ctx;
  if ((r = cuCtxGetCurrent(&ctx)) != CUDA_SUCCESS) return r;
  if (ctx == NULL) return CUDA_ERROR_INVALID_CONTEXT; /* the caller's torch made one current */
  CUmodule mod;
  if ((r = cuModuleLoadData(&mod, image)) != CUDA_SUCCESS) return r;
  if ((r = cuModuleGetFunction(&g_fn, mod, name)) != CUDA_SUCCESS) return r;
  int n = (int)strlen(spec);
  if (n > 64) return CUDA_ERROR_INVALID_VALUE;
  for (int k = 0; k < n; k++) {
    g_store[k] = 0;
    if (spec[k] == 'p') {
      CUdeviceptr p;
      if ((r = cuMemAlloc(&p, 1 << 16)) != CUDA_SUCCESS) return r;
      g_store[k] = p;
    } else if (spec[k] == 'i') {
      int v = 1000;
      memcpy(&g_store[k], &v, 4);
    }
    g_args[k] = &g_store[k];
  }
  g_shared = shared;
  g_threads = 32u * (unsigned)num_warps;
  return 0;
}

double floor_run(CUstream s, int iters) {
  CUresult r;
  double t0 = now();
  for (int i = 0; i < iters; i++)
    if ((r = cuLaunchKernel(g_fn, 1, 1, 1, g_threads, 1, 1, g_shared, s, g_args, NULL)) != CUDA_SUCCESS) return -(double)r;
  if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS) return -(double)r;
  return (now() - t0) / iters * 1e6;
}
