/*
 * SIMULATED Cambricon CNDrv for tritonjit-mlu's tests. No MLU is involved.
 *
 * Exports the cn_api.h calls the plugin makes, with CNDrv's signatures, checks their
 * inputs and records each call as a text line. The real cnfatbin format is not
 * public: this driver accepts the TEST-DEFINED container "TJSIMCNB" + uint32 size +
 * the kernel names (NUL-separated, empty name last), which the tests build.
 * A real driver knows each kernel's parameter sizes from the binary; this one is told
 * them by the test (sim_expect_params) and reads kernelParams byte by byte.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char tritonjit_simulated_driver[] = "cn";

enum { OK = 0, ERR_VALUE = 1, ERR_NOT_INIT = 3, ERR_DEVICE = 100, ERR_IMAGE = 200, ERR_HANDLE = 400,
       ERR_NOT_FOUND = 500, ERR_RESOURCES = 701 };
#define MAXN 256
#define MAXREC 8192

typedef struct { char names[16][128]; int n; } module_t;
typedef struct { module_t *mod; char name[128]; } kernel_t;
typedef struct { char name[128]; int n; size_t sizes[64]; } layout_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *recs[MAXREC];
static int nrec, initialized, devices = 1, ctx_current;
static module_t *mods[MAXN];
static int nmods;
static kernel_t *kerns[MAXN];
static int nkerns;
static layout_t layouts[64];
static int nlayouts;
static int attr_ids[32], attr_vals[32], nattrs;
static char fail_sym[64];
static int fail_code;

static void rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void rec(const char *fmt, ...) {
  if (nrec >= MAXREC) return;
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  recs[nrec++] = strdup(buf);
}
static int injected(const char *s) {
  if (fail_code && strcmp(s, fail_sym) == 0) { int c = fail_code; fail_code = 0; rec("error %s code=%d (injected)", s, c); return c; }
  return 0;
}

int cnInit(unsigned int flags) { initialized = (flags == 0); return flags == 0 ? OK : ERR_VALUE; }
int cnDeviceGetCount(int *n) { if (!initialized) return ERR_NOT_INIT; if (!n) return ERR_VALUE; *n = devices; return OK; }
int cnDeviceGetAttribute(int *v, int attr, int dev) {
  if (!v || dev < 0 || dev >= devices) return ERR_DEVICE;
  for (int i = 0; i < nattrs; i++) if (attr_ids[i] == attr) { *v = attr_vals[i]; return OK; }
  return ERR_VALUE;
}
int cnSharedContextAcquire(void **ctx, int dev) {
  if (!ctx || dev < 0 || dev >= devices) return ERR_DEVICE;
  *ctx = (void *)(uintptr_t)(0xC0DE00 + dev);
  return OK;
}
int cnCtxSetCurrent(void *ctx) { ctx_current = ctx != NULL; return ctx ? OK : ERR_VALUE; }
int cnGetErrorString(int code, const char **s) {
  if (!s) return ERR_VALUE;
  *s = code == ERR_VALUE ? "CN_ERROR_INVALID_VALUE (simulated)" : code == ERR_IMAGE ? "CN_ERROR_INVALID_IMAGE (simulated)"
     : code == ERR_NOT_FOUND ? "CN_ERROR_NOT_FOUND (simulated)" : code == ERR_HANDLE ? "CN_ERROR_INVALID_HANDLE (simulated)"
     : "CN_ERROR (simulated)";
  return OK;
}

int cnModuleLoadFatBinary(const void *fatbin, void **module) {
  pthread_mutex_lock(&mu);
  int rc = injected("cnModuleLoadFatBinary");
  const unsigned char *p = fatbin;
  uint32_t size = 0;
  if (!rc && (!p || !module || !ctx_current)) rc = ERR_VALUE;
  if (!rc && memcmp(p, "TJSIMCNB", 8) != 0) rc = ERR_IMAGE;
  if (!rc) {
    memcpy(&size, p + 8, 4);
    module_t *m = calloc(1, sizeof *m);
    const char *s = (const char *)p + 12;
    while (*s && m->n < 16 && (const unsigned char *)s < p + size) { strncpy(m->names[m->n++], s, 127); s += strlen(s) + 1; }
    mods[nmods++] = m;
    *module = m;
    rec("load symbol=cnModuleLoadFatBinary bytes=%u kernels=%d", size, m->n);
  } else if (!fail_code) rec("error cnModuleLoadFatBinary code=%d", rc);
  pthread_mutex_unlock(&mu);
  return rc;
}

int cnModuleGetKernel(void *module, const char *name, void **kernel) {
  pthread_mutex_lock(&mu);
  int rc = ERR_HANDLE;
  for (int i = 0; i < nmods; i++) if (mods[i] == module) rc = ERR_NOT_FOUND;
  if (rc == ERR_NOT_FOUND && name && kernel) {
    module_t *m = module;
    for (int i = 0; i < m->n; i++) if (strcmp(m->names[i], name) == 0) rc = OK;
  }
  if (!rc) {
    kernel_t *k = calloc(1, sizeof *k);
    k->mod = module;
    strncpy(k->name, name, 127);
    kerns[nkerns++] = k;
    *kernel = k;
  }
  rec("get_kernel name=%s rc=%d", name ? name : "(null)", rc);
  pthread_mutex_unlock(&mu);
  return rc;
}

int cnInvokeKernel(void *kernel, unsigned dimx, unsigned dimy, unsigned dimz, int kclass, unsigned reserve,
                   void *queue, void **params, void **extra) {
  pthread_mutex_lock(&mu);
  int rc = injected("cnInvokeKernel");
  kernel_t *k = NULL;
  layout_t *l = NULL;
  for (int i = 0; i < nkerns; i++) if (kerns[i] == kernel) k = kerns[i];
  if (!rc && !k) rc = ERR_HANDLE;
  if (!rc) for (int i = 0; i < nlayouts; i++) if (strcmp(layouts[i].name, k->name) == 0) l = &layouts[i];
  if (!rc && (!l || reserve != 0 || extra != NULL || dimx == 0 || dimy == 0 || dimz == 0 ||
              kclass <= 0 || (kclass & (kclass - 1)) != 0)) rc = ERR_VALUE;
  if (!rc && l->n > 0 && !params) rc = ERR_VALUE;
  for (int i = 0; !rc && l && i < l->n; i++) if (!params[i]) rc = ERR_VALUE;
  if (!rc) {
    char hex[3000] = "";
    size_t pos = 0;
    for (int i = 0; i < l->n; i++) {
      const unsigned char *b = params[i];
      if (i) hex[pos++] = '|';
      for (size_t j = 0; j < l->sizes[i] && pos + 3 < sizeof hex; j++) pos += sprintf(hex + pos, "%02x", b[j]);
    }
    hex[pos] = 0;
    rec("launch kernel=%s grid=%u,%u,%u class=%d stream=%llu params=%s", k->name, dimx, dimy, dimz, kclass,
        (unsigned long long)(uintptr_t)queue, hex);
  } else if (!fail_code) rec("error cnInvokeKernel code=%d", rc);
  pthread_mutex_unlock(&mu);
  return rc;
}

/* ---- the tests' side ---- */
void sim_set_attribute(int attr, int value) {
  for (int i = 0; i < nattrs; i++) if (attr_ids[i] == attr) { attr_vals[i] = value; return; }
  attr_ids[nattrs] = attr; attr_vals[nattrs++] = value;
}
void sim_set_devices(int n) { devices = n; }
int sim_expect_params(const char *name, int n, const size_t *sizes) {
  pthread_mutex_lock(&mu);
  layout_t *l = NULL;
  for (int i = 0; i < nlayouts; i++) if (strcmp(layouts[i].name, name) == 0) l = &layouts[i];
  if (!l) l = &layouts[nlayouts++];
  strncpy(l->name, name, 127);
  l->n = n;
  memcpy(l->sizes, sizes, (size_t)n * sizeof(size_t));
  pthread_mutex_unlock(&mu);
  return 0;
}
void sim_fail_next(const char *sym, int code) { strncpy(fail_sym, sym, 63); fail_code = code; }
int sim_record_count(void) { return nrec; }
const char *sim_record(int i) { return i >= 0 && i < nrec ? recs[i] : NULL; }
void sim_reset(void) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nrec; i++) free(recs[i]);
  nrec = 0; fail_code = 0; devices = 1;
  pthread_mutex_unlock(&mu);
}
