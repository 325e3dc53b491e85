/*
 * SIMULATED Ascend runtime for tritonjit-npu's tests. No NPU is involved.
 *
 * Exports the CANN acl / rt functions the plugin calls, with CANN's signatures
 * (acl/acl_rt.h, runtime/rt.h), checks every input the way the plugin's contract
 * demands, and records each call so the tests can assert on it. "Device memory" is
 * host memory; kernels are never executed. Built by the tests with gcc.
 */
#include <elf.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t rtError_t;
typedef int aclError;
typedef void (*aclrtCallback)(void *userData);

typedef struct {
  uint32_t magic;
  uint32_t version;
  const void *data;
  uint64_t length;
} rtDevBinary_t;

#define RT_DEV_BINARY_MAGIC_ELF 0x43554245U
#define RT_DEV_BINARY_MAGIC_ELF_AIVEC 0x41415246U
#define RT_DEV_BINARY_MAGIC_ELF_AICUBE 0x41494343U
#define RT_MEMORY_HBM 0x2U
#define RT_MEMCPY_HOST_TO_DEVICE 1U

/* error codes of the simulation (the real runtime's are other numbers) */
enum {
  SIM_OK = 0,
  SIM_BAD_DEVICE = 107001,
  SIM_BAD_BINARY = 107002,
  SIM_NO_SUCH_SYMBOL = 107003,
  SIM_BAD_HANDLE = 107004,
  SIM_BAD_ARGS = 107005,
  SIM_ARGS_MISMATCH = 107006,
  SIM_BAD_POINTER = 107007,
  SIM_BAD_VALUE = 107008,
};

/* lets tritonjit info say "SIMULATED driver" */
const char tritonjit_simulated_driver[] = "ascend";

#define FFTS_ADDR 0x00005A5A0000F0F0ULL
#define MAX_EVENTS 512
#define MAX_BYTES 1024
#define MAX_OBJS 256

typedef struct {
  char call[32];
  uint64_t a[6];
  char name[128];
  uint32_t nbytes;
  unsigned char bytes[MAX_BYTES];
} sim_event;

typedef struct { unsigned char *image; uint64_t length; uint32_t magic; } sim_module;
typedef struct { const void *stub; sim_module *mod; char dev_func[128]; char stub_name[128]; } sim_function;
typedef struct { void *ptr; uint64_t size; } sim_alloc;
typedef struct { aclrtCallback fn; void *user; void *stream; } sim_callback;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static sim_event events[MAX_EVENTS];
static int n_events;
static sim_module *modules[MAX_OBJS];
static int n_modules;
static sim_function functions[MAX_OBJS];
static int n_functions;
static sim_alloc allocs[MAX_OBJS];
static int n_allocs;
static sim_callback callbacks[MAX_OBJS];
static int n_callbacks;
static int device_count = 1;
static int32_t current_device;
static unsigned char expected[MAX_BYTES];
static int64_t expected_len = -1;
static int64_t last_mismatch = -1;
static char fail_call[32];
static int fail_code;

static sim_event *record(const char *call) {
  sim_event *e = &events[n_events < MAX_EVENTS ? n_events++ : MAX_EVENTS - 1];
  memset(e, 0, sizeof(*e));
  strncpy(e->call, call, sizeof(e->call) - 1);
  return e;
}

static int injected(const char *call) {
  if (fail_code && strcmp(call, fail_call) == 0) {
    int code = fail_code;
    fail_code = 0;
    return code;
  }
  return 0;
}

static sim_alloc *find_alloc(const void *p) {
  for (int i = 0; i < n_allocs; i++)
    if (allocs[i].ptr == p) return &allocs[i];
  return NULL;
}

/* Does the ELF image define a symbol called `name`? */
static int elf_has_symbol(const unsigned char *img, uint64_t len, const char *name) {
  if (len < sizeof(Elf64_Ehdr)) return 0;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
  if (eh->e_shoff == 0 || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len) return 0;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > len || strtab->sh_offset + strtab->sh_size > len) return 0;
    const Elf64_Sym *syms = (const Elf64_Sym *)(img + sh[i].sh_offset);
    for (uint64_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++) {
      if (syms[k].st_name >= strtab->sh_size || syms[k].st_shndx == SHN_UNDEF) continue;
      if (strcmp((const char *)img + strtab->sh_offset + syms[k].st_name, name) == 0) return 1;
    }
  }
  return 0;
}

/* ---- device ----------------------------------------------------------------------- */
rtError_t rtGetDeviceCount(int32_t *count) {
  pthread_mutex_lock(&mu);
  record("rtGetDeviceCount");
  int rc = count ? SIM_OK : SIM_BAD_VALUE;
  if (count) *count = device_count;
  pthread_mutex_unlock(&mu);
  return rc;
}

rtError_t rtSetDevice(int32_t device) {
  pthread_mutex_lock(&mu);
  record("rtSetDevice")->a[0] = (uint64_t)device;
  int rc = (device >= 0 && device < device_count) ? SIM_OK : SIM_BAD_DEVICE;
  if (rc == SIM_OK) current_device = device;
  pthread_mutex_unlock(&mu);
  return rc;
}

aclError aclrtSetDevice(int32_t device) { return rtSetDevice(device); }

aclError aclrtGetDevice(int32_t *device) {
  if (!device) return SIM_BAD_VALUE;
  *device = current_device;
  return SIM_OK;
}

const char *aclrtGetSocName(void) { return "Ascend910B3"; }

/* ---- binaries and functions ----------------------------------------------------------- */
rtError_t rtDevBinaryRegister(const rtDevBinary_t *bin, void **handle) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("rtDevBinaryRegister");
  int rc = injected("rtDevBinaryRegister");
  if (!rc && (!bin || !handle || !bin->data || bin->length < sizeof(Elf64_Ehdr))) rc = SIM_BAD_BINARY;
  if (!rc && bin->magic != RT_DEV_BINARY_MAGIC_ELF && bin->magic != RT_DEV_BINARY_MAGIC_ELF_AIVEC &&
      bin->magic != RT_DEV_BINARY_MAGIC_ELF_AICUBE) rc = SIM_BAD_BINARY;
  if (!rc && (bin->version != 0 || memcmp(bin->data, ELFMAG, SELFMAG) != 0 ||
              ((const unsigned char *)bin->data)[EI_CLASS] != ELFCLASS64)) rc = SIM_BAD_BINARY;
  if (!rc && n_modules >= MAX_OBJS) rc = SIM_BAD_BINARY;
  if (bin) { e->a[0] = bin->magic; e->a[1] = bin->version; e->a[2] = bin->length; }
  if (!rc) {
    sim_module *m = calloc(1, sizeof(sim_module));
    m->image = malloc(bin->length);
    memcpy(m->image, bin->data, bin->length);
    m->length = bin->length;
    m->magic = bin->magic;
    modules[n_modules++] = m;
    *handle = m;
    e->a[3] = (uint64_t)(uintptr_t)m;
    e->nbytes = bin->length < MAX_BYTES ? (uint32_t)bin->length : MAX_BYTES;
    memcpy(e->bytes, bin->data, e->nbytes);
  }
  e->a[5] = (uint64_t)rc;
  pthread_mutex_unlock(&mu);
  return rc;
}

rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char *stubName,
                             const void *devFunc, uint32_t funcMode) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("rtFunctionRegister");
  int rc = injected("rtFunctionRegister");
  sim_module *m = NULL;
  for (int i = 0; i < n_modules; i++)
    if (modules[i] == binHandle) m = modules[i];
  if (!rc && (!m || !stubFunc || !stubName || !devFunc || funcMode != 0)) rc = SIM_BAD_HANDLE;
  for (int i = 0; !rc && i < n_functions; i++)
    if (functions[i].stub == stubFunc || strcmp(functions[i].stub_name, stubName) == 0) rc = SIM_BAD_HANDLE;
  if (devFunc) strncpy(e->name, (const char *)devFunc, sizeof(e->name) - 1);
  if (!rc && !elf_has_symbol(m->image, m->length, (const char *)devFunc)) rc = SIM_NO_SUCH_SYMBOL;
  if (!rc && n_functions >= MAX_OBJS) rc = SIM_BAD_HANDLE;
  if (!rc) {
    sim_function *f = &functions[n_functions++];
    f->stub = stubFunc;
    f->mod = m;
    strncpy(f->dev_func, (const char *)devFunc, sizeof(f->dev_func) - 1);
    strncpy(f->stub_name, stubName, sizeof(f->stub_name) - 1);
  }
  e->a[0] = (uint64_t)(uintptr_t)binHandle;
  e->a[1] = (uint64_t)(uintptr_t)stubFunc;
  e->a[2] = funcMode;
  e->a[5] = (uint64_t)rc;
  if (stubName) {
    e->nbytes = (uint32_t)strnlen(stubName, MAX_BYTES - 1);
    memcpy(e->bytes, stubName, e->nbytes);
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

/* ---- memory ------------------------------------------------------------------------ */
rtError_t rtGetC2cCtrlAddr(uint64_t *addr, uint32_t *len) {
  pthread_mutex_lock(&mu);
  record("rtGetC2cCtrlAddr");
  int rc = (addr && len) ? SIM_OK : SIM_BAD_VALUE;
  if (!rc) { *addr = FFTS_ADDR; *len = 64; }
  pthread_mutex_unlock(&mu);
  return rc;
}

rtError_t rtMalloc(void **devPtr, uint64_t size, uint32_t type, uint16_t moduleId) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("rtMalloc");
  int rc = injected("rtMalloc");
  if (!rc && (!devPtr || size == 0 || type != RT_MEMORY_HBM || n_allocs >= MAX_OBJS)) rc = SIM_BAD_VALUE;
  if (!rc) {
    void *p = calloc(1, size);
    allocs[n_allocs].ptr = p;
    allocs[n_allocs++].size = size;
    *devPtr = p;
    e->a[2] = (uint64_t)(uintptr_t)p;
  }
  e->a[0] = size;
  e->a[1] = type;
  e->a[3] = moduleId;
  e->a[5] = (uint64_t)rc;
  pthread_mutex_unlock(&mu);
  return rc;
}

rtError_t rtFree(void *devPtr) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("rtFree");
  e->a[0] = (uint64_t)(uintptr_t)devPtr;
  int rc = SIM_BAD_POINTER;
  for (int i = 0; i < n_allocs; i++) {
    if (allocs[i].ptr == devPtr) {
      free(devPtr);
      allocs[i] = allocs[--n_allocs];
      rc = SIM_OK;
      break;
    }
  }
  e->a[5] = (uint64_t)rc;
  pthread_mutex_unlock(&mu);
  return rc;
}

rtError_t rtMemcpy(void *dst, uint64_t destMax, const void *src, uint64_t cnt, uint32_t kind) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("rtMemcpy");
  sim_alloc *a = find_alloc(dst);
  int rc = (a && src && cnt <= destMax && cnt <= a->size && kind == RT_MEMCPY_HOST_TO_DEVICE) ? SIM_OK : SIM_BAD_VALUE;
  if (!rc) memcpy(dst, src, cnt);
  e->a[0] = (uint64_t)(uintptr_t)dst;
  e->a[1] = destMax;
  e->a[2] = cnt;
  e->a[3] = kind;
  e->a[5] = (uint64_t)rc;
  if (src) {
    e->nbytes = cnt < MAX_BYTES ? (uint32_t)cnt : MAX_BYTES;
    memcpy(e->bytes, src, e->nbytes);
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

/* ---- launch ---------------------------------------------------------------------- */
rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize,
                         void *smDesc, void *stream) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("rtKernelLaunch");
  int rc = injected("rtKernelLaunch");
  sim_function *f = NULL;
  for (int i = 0; i < n_functions; i++)
    if (functions[i].stub == stubFunc) f = &functions[i];
  if (!rc && !f) rc = SIM_BAD_HANDLE;
  if (!rc && (!args || argsSize < 36 || argsSize % 4 != 0 || smDesc != NULL || blockDim == 0)) rc = SIM_BAD_ARGS;
  if (!rc) {
    const unsigned char *b = args;
    uint64_t ffts, lock, ws;
    int32_t g[3];
    memcpy(&ffts, b, 8);
    memcpy(&lock, b + 8, 8);
    memcpy(&ws, b + 16, 8);
    memcpy(g, b + argsSize - 12, 12);
    /* system arguments: the FFTS address, then a live lock array and workspace (or null) */
    if (ffts != FFTS_ADDR) rc = SIM_BAD_ARGS;
    if (lock && !find_alloc((void *)(uintptr_t)lock)) rc = SIM_BAD_POINTER;
    if (ws && !find_alloc((void *)(uintptr_t)ws)) rc = SIM_BAD_POINTER;
    /* the grid at the tail must be the block count's factors */
    if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0 ||
        (uint64_t)g[0] * (uint64_t)g[1] * (uint64_t)g[2] != blockDim) rc = SIM_BAD_ARGS;
    e->a[3] = ws ? find_alloc((void *)(uintptr_t)ws) ? find_alloc((void *)(uintptr_t)ws)->size : 0 : 0;
    /* the test's expected buffer, byte by byte */
    if (!rc && expected_len >= 0) {
      last_mismatch = -1;
      if ((int64_t)argsSize != expected_len) last_mismatch = argsSize < expected_len ? argsSize : expected_len;
      for (uint32_t i = 0; last_mismatch < 0 && i < argsSize; i++)
        if (b[i] != expected[i]) last_mismatch = i;
      if (last_mismatch >= 0) rc = SIM_ARGS_MISMATCH;
    }
  }
  e->a[0] = blockDim;
  e->a[1] = argsSize;
  e->a[2] = (uint64_t)(uintptr_t)stream;
  e->a[4] = (uint64_t)(uintptr_t)stubFunc;
  e->a[5] = (uint64_t)rc;
  if (f) strncpy(e->name, f->dev_func, sizeof(e->name) - 1);
  if (args) {
    e->nbytes = argsSize < MAX_BYTES ? argsSize : MAX_BYTES;
    memcpy(e->bytes, args, e->nbytes);
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, int blockType, void *stream) {
  pthread_mutex_lock(&mu);
  sim_event *e = record("aclrtLaunchCallback");
  int rc = (fn && (blockType == 0 || blockType == 1) && n_callbacks < MAX_OBJS) ? SIM_OK : SIM_BAD_VALUE;
  if (!rc) {
    callbacks[n_callbacks].fn = fn;
    callbacks[n_callbacks].user = userData;
    callbacks[n_callbacks++].stream = stream;
  }
  e->a[0] = (uint64_t)(uintptr_t)userData;
  e->a[1] = (uint64_t)blockType;
  e->a[2] = (uint64_t)(uintptr_t)stream;
  e->a[5] = (uint64_t)rc;
  pthread_mutex_unlock(&mu);
  return rc;
}

/* The stream "completes": run its callbacks in order (outside the lock: they call rtFree). */
aclError aclrtSynchronizeStream(void *stream) {
  sim_callback todo[MAX_OBJS];
  int n = 0;
  pthread_mutex_lock(&mu);
  record("aclrtSynchronizeStream")->a[0] = (uint64_t)(uintptr_t)stream;
  int keep = 0;
  for (int i = 0; i < n_callbacks; i++) {
    if (callbacks[i].stream == stream) todo[n++] = callbacks[i];
    else callbacks[keep++] = callbacks[i];
  }
  n_callbacks = keep;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; i++) todo[i].fn(todo[i].user);
  return SIM_OK;
}

/* ---- the tests' side ------------------------------------------------------------------ */
void sim_reset(void) {
  pthread_mutex_lock(&mu);
  n_events = 0;
  for (int i = 0; i < n_allocs; i++) free(allocs[i].ptr);
  n_allocs = 0;
  n_callbacks = 0;
  expected_len = -1;
  last_mismatch = -1;
  fail_code = 0;
  device_count = 1;
  current_device = 0;
  pthread_mutex_unlock(&mu);
}

void sim_set_device_count(int n) { device_count = n; }
int sim_event_count(void) { return n_events; }
const sim_event *sim_event_at(int i) { return (i >= 0 && i < n_events) ? &events[i] : NULL; }
int sim_live_allocations(void) { return n_allocs; }
int sim_pending_callbacks(void) { return n_callbacks; }
int64_t sim_last_mismatch(void) { return last_mismatch; }

void sim_expect_args(const unsigned char *bytes, int64_t len) {
  pthread_mutex_lock(&mu);
  expected_len = len > MAX_BYTES ? MAX_BYTES : len;
  if (bytes && len > 0) memcpy(expected, bytes, (size_t)expected_len);
  pthread_mutex_unlock(&mu);
}

void sim_fail_next(const char *call, int code) {
  pthread_mutex_lock(&mu);
  strncpy(fail_call, call, sizeof(fail_call) - 1);
  fail_code = code;
  pthread_mutex_unlock(&mu);
}
