/* A SIMULATED vendor driver for tests: no hardware, no kernel execution.
 *
 * It exports the module-load / get-function / launch symbols of a CUDA-like
 * vendor driver with the vendor's signatures, checks every input (module image is
 * an ELF holding the kernel symbol, grid and block bounds, block a multiple of the
 * warp size, shared memory against the function's limit, the argument buffer byte
 * by byte against the layout the test registered) and records each call as one
 * text line that the tests read back through the sim_* control functions.
 *
 * Built by tritonjit.pluginkit.build_simulated_driver with gcc, parameterized by:
 *   SIM_PREFIX   symbol prefix (cu, hip, mu, mc)
 *   SIM_DRIVER   1: driver-API flavor (XInit, XDeviceGetCount, XLaunchKernel,
 *                   XGetErrorString(rc, const char**), contexts)
 *                0: runtime flavor (XGetDeviceCount, XModuleLaunchKernel,
 *                   const char* XGetErrorString(rc), XGetDevice/XSetDevice)
 *   SIM_LOAD_EX  1: XModuleLoadDataEx(mod, image, n, options, values) (HIP)
 *   SIM_CTX      1: also export XCtxGetCurrent/XDevicePrimaryCtxRetain/XCtxSetCurrent
 * Error codes follow CUDA's numbering, which HIP shares for these cases.
 */
#include <elf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define SYM(n) CAT(SIM_PREFIX, n)
#define STR_(x) #x
#define STR(x) STR_(x)
#define EXPORT __attribute__((visibility("default")))

enum {
  SIM_SUCCESS = 0, SIM_INVALID_VALUE = 1, SIM_NOT_INITIALIZED = 3, SIM_NO_DEVICE = 100,
  SIM_INVALID_IMAGE = 200, SIM_INVALID_CONTEXT = 201, SIM_INVALID_HANDLE = 400,
  SIM_NOT_FOUND = 500, SIM_OUT_OF_RESOURCES = 701
};

EXPORT const char tritonjit_simulated_driver[] = STR(SIM_PREFIX);

#define MAX_SYMS 256
#define MAX_RECORDS 65536
#define MAX_LAYOUTS 64
#define MAX_ATTRS 64

typedef struct { char *image; size_t size; int nsyms; char *syms[MAX_SYMS]; int live; } sim_module;
typedef struct { sim_module *mod; char name[256]; int shared_limit; int magic; } sim_function;
typedef struct { char name[256]; int n; size_t sizes[128]; } sim_layout;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *records[MAX_RECORDS];
static int nrecords;
static char last_error[1024];
static sim_layout layouts[MAX_LAYOUTS];
static int nlayouts;
static int attr_ids[MAX_ATTRS], attr_vals[MAX_ATTRS], nattrs;
static int device_count = 1, warp_size = 32, max_threads = 1024;
static int static_shared = 48 * 1024, max_shared = 48 * 1024, dyn_shared_attr = -1;
static int initialized = !SIM_DRIVER, ctx_current = !(SIM_DRIVER || SIM_CTX), current_device;
static char fail_symbol[128];
static int fail_code;
#define FN_MAGIC 0x5157u

static void record(const char *fmt, ...) {
  char buf[16384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (nrecords < MAX_RECORDS) records[nrecords++] = strdup(buf);
}

static int fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  record("error code=%d %s", code, last_error);
  return code;
}

/* a failure injected by the test for the named symbol, once */
static int injected(const char *symbol) {
  if (fail_code && strcmp(fail_symbol, symbol) == 0) {
    int code = fail_code;
    fail_code = 0;
    return fail(code, "%s: failure injected by the test", symbol);
  }
  return 0;
}

/* ---- control API for the tests (not vendor symbols) ------------------------------ */
EXPORT void sim_configure(int devices, int warp, int threads, int static_smem, int max_smem, int dyn_attr) {
  pthread_mutex_lock(&lock);
  device_count = devices; warp_size = warp; max_threads = threads;
  static_shared = static_smem; max_shared = max_smem; dyn_shared_attr = dyn_attr;
  pthread_mutex_unlock(&lock);
}
EXPORT void sim_set_attribute(int attr, int value) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nattrs; i++) if (attr_ids[i] == attr) { attr_vals[i] = value; pthread_mutex_unlock(&lock); return; }
  if (nattrs < MAX_ATTRS) { attr_ids[nattrs] = attr; attr_vals[nattrs++] = value; }
  pthread_mutex_unlock(&lock);
}
EXPORT int sim_expect_params(const char *kernel, int n, const size_t *sizes) {
  if (n < 0 || n > 128) return -1;
  pthread_mutex_lock(&lock);
  sim_layout *l = NULL;
  for (int i = 0; i < nlayouts; i++) if (strcmp(layouts[i].name, kernel) == 0) l = &layouts[i];
  if (!l && nlayouts < MAX_LAYOUTS) l = &layouts[nlayouts++];
  if (l) { snprintf(l->name, sizeof l->name, "%s", kernel); l->n = n; memcpy(l->sizes, sizes, n * sizeof(size_t)); }
  pthread_mutex_unlock(&lock);
  return l ? 0 : -1;
}
EXPORT void sim_fail_next(const char *symbol, int code) {
  pthread_mutex_lock(&lock);
  snprintf(fail_symbol, sizeof fail_symbol, "%s", symbol);
  fail_code = code;
  pthread_mutex_unlock(&lock);
}
EXPORT int sim_record_count(void) { return nrecords; }
EXPORT const char *sim_record(int i) { return (i >= 0 && i < nrecords) ? records[i] : NULL; }
EXPORT const char *sim_last_error(void) { return last_error; }
EXPORT void sim_reset(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nrecords; i++) free(records[i]);
  nrecords = 0; last_error[0] = 0; fail_code = 0;
  pthread_mutex_unlock(&lock);
}

/* ---- ELF reading: the module image must be an ELF64 that holds the kernel symbol -- */
static int read_elf(const char *image, sim_module *m) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return fail(SIM_INVALID_IMAGE, "module image is not an ELF file (magic %02x %02x %02x %02x)", (unsigned char)image[0], (unsigned char)image[1], (unsigned char)image[2], (unsigned char)image[3]);
  if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr)) return fail(SIM_INVALID_IMAGE, "module image is not a 64-bit ELF");
  if (eh->e_shnum == 0 || eh->e_shoff == 0 || eh->e_shnum > 4096) return fail(SIM_INVALID_IMAGE, "module image has no section table");
  size_t size = eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr);
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(image + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > size) size = sh[i].sh_offset + sh[i].sh_size;
  if (size > ((size_t)1 << 30)) return fail(SIM_INVALID_IMAGE, "module image claims %zu bytes", size);
  m->image = malloc(size);
  memcpy(m->image, image, size); /* a real driver copies the image too */
  m->size = size;
  sh = (const Elf64_Shdr *)(m->image + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_link >= eh->e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym)) continue;
    const Elf64_Shdr *strs = &sh[sh[i].sh_link];
    const Elf64_Sym *syms = (const Elf64_Sym *)(m->image + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t j = 0; j < n && m->nsyms < MAX_SYMS; j++) {
      if (ELF64_ST_TYPE(syms[j].st_info) != STT_FUNC || syms[j].st_name >= strs->sh_size) continue;
      const char *name = m->image + strs->sh_offset + syms[j].st_name;
      int dup = 0;
      for (int k = 0; k < m->nsyms; k++) if (strcmp(m->syms[k], name) == 0) dup = 1;
      if (!dup && *name) m->syms[m->nsyms++] = strdup(name);
    }
  }
  return SIM_SUCCESS;
}

static int load(void **module, const void *image, const char *symbol) {
  int rc;
  pthread_mutex_lock(&lock);
  if ((rc = injected(symbol))) goto out;
  if (!initialized) { rc = fail(SIM_NOT_INITIALIZED, "%s called before %s", symbol, STR(SYM(Init))); goto out; }
  if (!ctx_current) { rc = fail(SIM_INVALID_CONTEXT, "%s: no current context", symbol); goto out; }
  if (!module || !image) { rc = fail(SIM_INVALID_VALUE, "%s: null module or image pointer", symbol); goto out; }
  sim_module *m = calloc(1, sizeof *m);
  if ((rc = read_elf((const char *)image, m))) { free(m->image); free(m); goto out; }
  m->live = 1;
  *module = m;
  record("load symbol=%s bytes=%zu functions=%d", symbol, m->size, m->nsyms);
out:
  pthread_mutex_unlock(&lock);
  return rc;
}

#if SIM_LOAD_EX
EXPORT int SYM(ModuleLoadDataEx)(void **module, const void *image, unsigned int numOptions, void *options, void **optionValues) {
  if (numOptions && (!options || !optionValues)) return fail(SIM_INVALID_VALUE, "%s: %u options but null arrays", STR(SYM(ModuleLoadDataEx)), numOptions);
  return load(module, image, STR(SYM(ModuleLoadDataEx)));
}
#else
EXPORT int SYM(ModuleLoadData)(void **module, const void *image) { return load(module, image, STR(SYM(ModuleLoadData))); }
#endif

EXPORT int SYM(ModuleUnload)(void *module) {
  sim_module *m = module;
  pthread_mutex_lock(&lock);
  int rc = (!m || !m->live) ? fail(SIM_INVALID_HANDLE, "%s: not a loaded module", STR(SYM(ModuleUnload))) : SIM_SUCCESS;
  if (!rc) { m->live = 0; record("unload"); }
  pthread_mutex_unlock(&lock);
  return rc;
}

EXPORT int SYM(ModuleGetFunction)(void **function, void *module, const char *name) {
  const char *symbol = STR(SYM(ModuleGetFunction));
  sim_module *m = module;
  int rc = SIM_SUCCESS;
  pthread_mutex_lock(&lock);
  if ((rc = injected(symbol))) goto out;
  if (!function || !name) { rc = fail(SIM_INVALID_VALUE, "%s: null pointer argument", symbol); goto out; }
  if (!m || !m->live) { rc = fail(SIM_INVALID_HANDLE, "%s: not a loaded module", symbol); goto out; }
  for (int k = 0; k < m->nsyms; k++)
    if (strcmp(m->syms[k], name) == 0) {
      sim_function *f = calloc(1, sizeof *f);
      f->mod = m; f->magic = FN_MAGIC; f->shared_limit = static_shared;
      snprintf(f->name, sizeof f->name, "%s", name);
      *function = f;
      record("get_function name=%s", name);
      goto out;
    }
  rc = fail(SIM_NOT_FOUND, "%s: no kernel named '%s' in the module (%d functions)", symbol, name, m->nsyms);
out:
  pthread_mutex_unlock(&lock);
  return rc;
}

static int launch(const char *symbol, void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                  unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
  sim_function *f = function;
  int rc = SIM_SUCCESS;
  pthread_mutex_lock(&lock);
  if ((rc = injected(symbol))) goto out;
  if (!initialized) { rc = fail(SIM_NOT_INITIALIZED, "%s before init", symbol); goto out; }
  if (!f || f->magic != FN_MAGIC) { rc = fail(SIM_INVALID_HANDLE, "%s: not a function handle", symbol); goto out; }
  if (gx < 1 || gx > 0x7fffffffu || gy < 1 || gy > 65535 || gz < 1 || gz > 65535) { rc = fail(SIM_INVALID_VALUE, "%s: grid (%u, %u, %u) out of range", symbol, gx, gy, gz); goto out; }
  if (bx < 1 || by < 1 || bz < 1 || (unsigned long)bx * by * bz > (unsigned)max_threads) { rc = fail(SIM_INVALID_VALUE, "%s: block (%u, %u, %u) over %d threads", symbol, bx, by, bz, max_threads); goto out; }
  if (bx % warp_size) { rc = fail(SIM_INVALID_VALUE, "%s: block x %u is not a multiple of the warp size %d", symbol, bx, warp_size); goto out; }
  if ((int)shared > f->shared_limit) { rc = fail(SIM_INVALID_VALUE, "%s: %u bytes of shared memory over the function's limit %d", symbol, shared, f->shared_limit); goto out; }
  if (extra) { rc = fail(SIM_INVALID_VALUE, "%s: extra must be NULL (arguments go through kernelParams)", symbol); goto out; }
  sim_layout *l = NULL;
  for (int i = 0; i < nlayouts; i++) if (strcmp(layouts[i].name, f->name) == 0) l = &layouts[i];
  if (!l) { rc = fail(SIM_INVALID_VALUE, "%s: no parameter layout registered for '%s' (sim_expect_params)", symbol, f->name); goto out; }
  if (l->n && !params) { rc = fail(SIM_INVALID_VALUE, "%s: kernelParams is NULL, '%s' takes %d parameters", symbol, f->name, l->n); goto out; }
  char hex[12288];
  size_t pos = 0;
  for (int i = 0; i < l->n; i++) {
    if (!params[i]) { rc = fail(SIM_INVALID_VALUE, "%s: kernelParams[%d] is NULL", symbol, i); goto out; }
    if (i) hex[pos++] = '|';
    for (size_t b = 0; b < l->sizes[i] && pos + 3 < sizeof hex; b++) pos += snprintf(hex + pos, 3, "%02x", ((unsigned char *)params[i])[b]);
  }
  hex[pos] = 0;
  record("launch kernel=%s grid=%u,%u,%u block=%u,%u,%u shared=%u stream=%llu params=%s", f->name, gx, gy, gz, bx, by,
         bz, shared, (unsigned long long)(uintptr_t)stream, hex);
out:
  pthread_mutex_unlock(&lock);
  return rc;
}

static int device_attribute(const char *symbol, int *value, int attr, int device) {
  int rc = SIM_SUCCESS;
  pthread_mutex_lock(&lock);
  if (!value) { rc = fail(SIM_INVALID_VALUE, "%s: null value pointer", symbol); goto out; }
  if (device < 0 || device >= device_count) { rc = fail(SIM_INVALID_VALUE, "%s: no device %d", symbol, device); goto out; }
  for (int i = 0; i < nattrs; i++) if (attr_ids[i] == attr) { *value = attr_vals[i]; goto out; }
  rc = fail(SIM_INVALID_VALUE, "%s: attribute %d not configured in the simulated driver", symbol, attr);
out:
  pthread_mutex_unlock(&lock);
  return rc;
}

static const char *error_name(int rc) {
  switch (rc) {
    case SIM_SUCCESS: return "no error (simulated driver)";
    case SIM_INVALID_VALUE: return "invalid argument (simulated driver)";
    case SIM_NOT_INITIALIZED: return "driver not initialized (simulated driver)";
    case SIM_NO_DEVICE: return "no device (simulated driver)";
    case SIM_INVALID_IMAGE: return "device kernel image is invalid (simulated driver)";
    case SIM_INVALID_CONTEXT: return "invalid device context (simulated driver)";
    case SIM_INVALID_HANDLE: return "invalid resource handle (simulated driver)";
    case SIM_NOT_FOUND: return "named symbol not found (simulated driver)";
    case SIM_OUT_OF_RESOURCES: return "too many resources requested for launch (simulated driver)";
    default: return NULL;
  }
}

#if SIM_DRIVER || SIM_CTX
EXPORT int SYM(CtxGetCurrent)(void **ctx) {
  if (!ctx) return SIM_INVALID_VALUE;
  *ctx = ctx_current ? (void *)0xC0 : NULL;
  return initialized ? SIM_SUCCESS : SIM_NOT_INITIALIZED;
}
EXPORT int SYM(DevicePrimaryCtxRetain)(void **ctx, int device) {
  if (!initialized) return fail(SIM_NOT_INITIALIZED, "%s before init", STR(SYM(DevicePrimaryCtxRetain)));
  if (!ctx || device < 0 || device >= device_count) return fail(SIM_INVALID_VALUE, "%s: bad device %d", STR(SYM(DevicePrimaryCtxRetain)), device);
  *ctx = (void *)0xC0;
  record("ctx_retain device=%d", device);
  return SIM_SUCCESS;
}
EXPORT int SYM(CtxSetCurrent)(void *ctx) {
  ctx_current = ctx != NULL;
  record("ctx_set_current");
  return SIM_SUCCESS;
}
#endif

#if SIM_DRIVER
EXPORT int SYM(Init)(unsigned int flags) {
  if (flags != 0) return fail(SIM_INVALID_VALUE, "%s: flags must be 0", STR(SYM(Init)));
  initialized = 1;
  return device_count > 0 ? SIM_SUCCESS : SIM_NO_DEVICE;
}
EXPORT int SYM(DeviceGetCount)(int *count) {
  if (!initialized) return SIM_NOT_INITIALIZED;
  if (!count) return SIM_INVALID_VALUE;
  *count = device_count;
  return SIM_SUCCESS;
}
EXPORT int SYM(DeviceGetAttribute)(int *value, int attr, int device) { return device_attribute(STR(SYM(DeviceGetAttribute)), value, attr, device); }
EXPORT int SYM(GetErrorString)(int rc, const char **out) {
  if (!out) return SIM_INVALID_VALUE;
  *out = error_name(rc);
  return *out ? SIM_SUCCESS : SIM_INVALID_VALUE;
}
EXPORT int SYM(FuncSetAttribute)(void *function, int attr, int value) {
  sim_function *f = function;
  if (!f || f->magic != FN_MAGIC) return fail(SIM_INVALID_HANDLE, "%s: not a function handle", STR(SYM(FuncSetAttribute)));
  if (attr == dyn_shared_attr) {
    if (value < 0 || value > max_shared) return fail(SIM_INVALID_VALUE, "%s: %d bytes over the opt-in maximum %d", STR(SYM(FuncSetAttribute)), value, max_shared);
    f->shared_limit = value > static_shared ? value : static_shared;
  }
  record("func_set_attribute kernel=%s attr=%d value=%d", f->name, attr, value);
  return SIM_SUCCESS;
}
EXPORT int SYM(LaunchKernel)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             unsigned shared, void *stream, void **params, void **extra) {
  return launch(STR(SYM(LaunchKernel)), f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
#else
EXPORT int SYM(GetDeviceCount)(int *count) {
  if (!count) return SIM_INVALID_VALUE;
  *count = device_count;
  return device_count > 0 ? SIM_SUCCESS : SIM_NO_DEVICE;
}
EXPORT int SYM(GetDevice)(int *device) { if (!device) return SIM_INVALID_VALUE; *device = current_device; return SIM_SUCCESS; }
EXPORT int SYM(SetDevice)(int device) {
  if (device < 0 || device >= device_count) return fail(SIM_INVALID_VALUE, "%s: no device %d", STR(SYM(SetDevice)), device);
  current_device = device;
  return SIM_SUCCESS;
}
EXPORT int SYM(DeviceGetAttribute)(int *value, int attr, int device) { return device_attribute(STR(SYM(DeviceGetAttribute)), value, attr, device); }
EXPORT const char *SYM(GetErrorString)(int rc) { const char *s = error_name(rc); return s ? s : "unknown error (simulated driver)"; }
EXPORT int SYM(ModuleLaunchKernel)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                   unsigned shared, void *stream, void **params, void **extra) {
  return launch(STR(SYM(ModuleLaunchKernel)), f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}
#endif
