// The physical floor of host-side launch cost: a tight C loop of cuLaunchKernel on
// a cubin that Triton produced, with the same arguments a Python call passes.
// Usage: launch_floor_cuda CUBIN NAME SHARED NUM_WARPS ARGSPEC ITERS REPS
//   ARGSPEC: one letter per kernel parameter: p (a device pointer to 64 KiB),
//   i (int32 = 1000), s (a null scratch pointer).
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); \
  fprintf(stderr, "%s: %s\n", #x, s); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  if (argc != 8) { fprintf(stderr, "usage: %s CUBIN NAME SHARED NUM_WARPS ARGSPEC ITERS REPS\n", argv[0]); return 2; }
  const char* spec = argv[5];
  unsigned shared = atoi(argv[3]); int nwarps = atoi(argv[4]); int iters = atoi(argv[6]); int reps = atoi(argv[7]);
  int n = (int)strlen(spec);
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0)); CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  CUmodule mod; CK(cuModuleLoad(&mod, argv[1])); CUfunction f; CK(cuModuleGetFunction(&f, mod, argv[2]));
  unsigned long long store[64]; void* args[64];
  for (int k = 0; k < n; k++) {
    store[k] = 0;
    if (spec[k] == 'p') { CUdeviceptr p; CK(cuMemAlloc(&p, 1 << 16)); store[k] = p; }
    else if (spec[k] == 'i') { int v = 1000; memcpy(&store[k], &v, 4); }
    args[k] = &store[k];
  }
  CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 200; i++) CK(cuLaunchKernel(f, 1, 1, 1, 32 * nwarps, 1, 1, shared, s, args, NULL));
  CK(cuStreamSynchronize(s));
  double best = 1e9;
  for (int rep = 0; rep < reps; rep++) {
    double t0 = now();
    for (int i = 0; i < iters; i++) CK(cuLaunchKernel(f, 1, 1, 1, 32 * nwarps, 1, 1, shared, s, args, NULL));
    CK(cuStreamSynchronize(s));
    double per = (now() - t0) / iters * 1e6;
    if (per < best) best = per;
  }
  printf("RESULT %.4f\n", best);
  return 0;
}
