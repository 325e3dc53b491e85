/* tritonjit._native._dispatch's Recorder: a C launch entry that records what reaches it
 * instead of launching, for tests and benchmarks of the native path on machines without
 * an accelerator (tritonjit.testing.RecordingBackend). It simulates no vendor. Compiled
 * into the same module as the dispatcher (_dispatch.c), kept apart from its hot path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tritonjit_launch.h"
#include "_dispatch.h"

/* ---- Recorder: a launch entry that records instead of launching ------------------------
 * For tests on machines without an accelerator: a test backend's make_launcher returns
 * one, so the whole native path (bind, key, memo, lookup, C launch entry) runs and what
 * reached the "device" can be inspected. Not a driver: it is named for what it does. */
#define REC_PENDING_MAX 4096

/* a launch recorded without the GIL: digested in C, turned into Python when read */
typedef struct {
  unsigned int grid[3];
  uint64_t stream;
  Py_ssize_t nargs;
  int packed;       /* a packed buffer: kind holds each parameter's tj_pack_code */
  int kind[MAXP];
  uint64_t bits[MAXP];
} RecPending;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *calls;
  int keep;                /* record each launch in ``calls`` (else only count) */
  unsigned long long count;
  tj_launch tj;
  pthread_mutex_t mu;      /* guards the GIL-free records below */
  RecPending *pending;
  Py_ssize_t n_pending;
  unsigned long long dropped;
  Py_ssize_t n_layout;     /* > 0: the recorder takes packed buffers (TJ_LAUNCH_F_PACKED) by layout */
  tj_pack_slot layout[MAXP];
} Recorder;

static int rec_flush(Recorder *r);

static int rec_current_stream(void *self, int device, uint64_t *out) {
  (void)self;
  *out = 1000u + (uint64_t)device;
  return 0;
}

/* Count a launch made with the GIL; 1 where it is to be recorded (the GIL-free records
 * moved in first, to keep the order of launches), 0 where the recorder only counts, -1
 * on an error. */
static int rec_counted(Recorder *r) {
  __atomic_add_fetch(&r->count, 1, __ATOMIC_RELAXED); /* GIL-free launches count too */
  if (!r->keep) return 0;
  return rec_flush(r) < 0 ? -1 : 1;
}

/* Append (path, grid, stream, values) to ``calls``; ``values`` is stolen (NULL: an error
 * already set). 0, or -1 with a Python error. */
static int rec_append(Recorder *r, const char *path, const unsigned int grid[3], uint64_t stream, PyObject *values) {
  PyObject *rec = values ? Py_BuildValue("(s(III)KN)", path, grid[0], grid[1], grid[2], (unsigned long long)stream,
                                         values)
                         : NULL;
  int rc = rec ? PyList_Append(r->calls, rec) : -1;
  Py_XDECREF(rec);
  return rc;
}

/* Parameter ``p`` of a packed buffer, as its slot's code reads it: the value's bits (an
 * int sign- or zero-extended, an fp32 widened to a double's bits). */
static uint64_t rec_unpack(const tj_pack_slot *slot, const unsigned char *buf) {
  const unsigned char *at = buf + slot->offset;
  uint64_t u = 0;
  switch (slot->code) {
    case TJ_PACK_I32: { int32_t x; memcpy(&x, at, 4); return (uint64_t)(int64_t)x; }
    case TJ_PACK_FP32: { float f; memcpy(&f, at, 4); double d = f; memcpy(&u, &d, 8); return u; }
    case TJ_PACK_B8: return at[0];
    case TJ_PACK_SKIP: return 0;
    default: memcpy(&u, at, 8); return u;
  }
}

/* (code, value) of a packed parameter for ``calls``; None for a skipped one. */
static PyObject *rec_packed_value(int code, uint64_t bits) {
  double d;
  switch (code) {
    case TJ_PACK_SKIP: Py_RETURN_NONE;
    case TJ_PACK_FP32: case TJ_PACK_FP64: memcpy(&d, &bits, 8); return Py_BuildValue("(id)", code, d);
    case TJ_PACK_I32: case TJ_PACK_I64: return Py_BuildValue("(iL)", code, (long long)bits);
    default: return Py_BuildValue("(iK)", code, (unsigned long long)bits);
  }
}

/* launch_packed of the recorder (GIL held): recorded as ("packed", grid, stream, values). */
static int rec_launch_packed(void *self, const unsigned int grid[3], uint64_t stream, unsigned char *buf) {
  Recorder *r = (Recorder *)self;
  int keep = rec_counted(r);
  if (keep <= 0) return keep;
  PyObject *values = PyList_New(r->n_layout);
  for (Py_ssize_t p = 0; values != NULL && p < r->n_layout; p++) {
    PyObject *v = rec_packed_value(r->layout[p].code, rec_unpack(&r->layout[p], buf));
    if (v == NULL) Py_CLEAR(values);
    else PyList_SET_ITEM(values, p, v);
  }
  return rec_append(r, "packed", grid, stream, values);
}

static int rec_launch(void *self, const unsigned int grid[3], uint64_t stream, const tj_arg *args, Py_ssize_t nargs) {
  Recorder *r = (Recorder *)self;
  int keep = rec_counted(r);
  if (keep <= 0) return keep;
  PyObject *digest = PyList_New(nargs);
  for (Py_ssize_t i = 0; digest != NULL && i < nargs; i++) {
    PyObject *v = tj_arg_describe(&args[i]);
    if (v == NULL) Py_CLEAR(digest);
    else PyList_SET_ITEM(digest, i, v);
  }
  return rec_append(r, "native", grid, stream, digest);
}

/* Count a GIL-free launch and, where the recorder keeps them, the record to fill (its
 * arguments left to the caller), or NULL (only counting, or REC_PENDING_MAX records not
 * yet read: dropped). Called with r->mu held. */
static RecPending *rec_pending(Recorder *r, const unsigned int grid[3], uint64_t stream, Py_ssize_t nargs) {
  __atomic_add_fetch(&r->count, 1, __ATOMIC_RELAXED);
  if (!r->keep) return NULL;
  if (r->pending == NULL) r->pending = (RecPending *)calloc(REC_PENDING_MAX, sizeof(RecPending));
  if (r->pending == NULL || r->n_pending == REC_PENDING_MAX) {
    r->dropped++;
    return NULL;
  }
  RecPending *p = &r->pending[r->n_pending++];
  memcpy(p->grid, grid, sizeof p->grid);
  p->stream = stream;
  p->nargs = nargs;
  p->packed = 0;
  return p;
}

/* launch_nogil of the recorder: kept in C under a mutex (no Python object may be touched),
 * moved into ``calls`` as ("nogil", grid, stream, digest) when ``calls`` is read. */
static int rec_launch_nogil(void *self, const unsigned int grid[3], uint64_t stream, const tj_arg *args,
                            Py_ssize_t nargs, char *err, size_t errlen) {
  Recorder *r = (Recorder *)self;
  if (nargs > MAXP) {
    snprintf(err, errlen, "recorder: %zd arguments, at most %d", nargs, MAXP);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++)
    if (args[i].kind == TJ_ARG_TUPLE) return 1; /* recorded with the GIL (rec_launch), as a list */
  pthread_mutex_lock(&r->mu);
  RecPending *p = rec_pending(r, grid, stream, nargs);
  for (Py_ssize_t i = 0; p != NULL && i < nargs; i++) {
    p->kind[i] = args[i].kind;
    p->bits[i] = args[i].v.u;
  }
  pthread_mutex_unlock(&r->mu);
  return 0;
}

/* launch_packed_nogil of the recorder: as rec_launch_nogil, recorded as ("packed", ...). */
static int rec_launch_packed_nogil(void *self, const unsigned int grid[3], uint64_t stream, unsigned char *buf,
                                   char *err, size_t errlen) {
  Recorder *r = (Recorder *)self;
  (void)err, (void)errlen;
  pthread_mutex_lock(&r->mu);
  RecPending *p = rec_pending(r, grid, stream, r->n_layout);
  if (p != NULL) p->packed = 1;
  for (Py_ssize_t i = 0; p != NULL && i < r->n_layout; i++) {
    p->kind[i] = r->layout[i].code;
    p->bits[i] = rec_unpack(&r->layout[i], buf);
  }
  pthread_mutex_unlock(&r->mu);
  return 0;
}

/* Move the GIL-free records into ``calls`` (called with the GIL). */
static int rec_flush(Recorder *r) {
  pthread_mutex_lock(&r->mu);
  Py_ssize_t n = r->n_pending;
  RecPending *pend = r->pending;
  r->pending = NULL;
  r->n_pending = 0;
  pthread_mutex_unlock(&r->mu);
  int rc = 0;
  for (Py_ssize_t k = 0; k < n && rc == 0; k++) {
    RecPending *p = &pend[k];
    PyObject *digest = PyList_New(p->nargs);
    if (!digest) {
      rc = -1;
      break;
    }
    for (Py_ssize_t i = 0; i < p->nargs; i++) {
      /* a tj_arg again (no Python object, no tuple: those are recorded with the GIL) */
      const tj_arg a = {.kind = p->kind[i], .v.u = p->bits[i], .obj = NULL};
      PyObject *v = p->packed ? rec_packed_value(a.kind, a.v.u) : tj_arg_describe(&a);
      if (!v) {
        Py_DECREF(digest);
        digest = NULL;
        break;
      }
      PyList_SET_ITEM(digest, i, v);
    }
    rc = rec_append(r, p->packed ? "packed" : "nogil", p->grid, p->stream, digest);
  }
  free(pend);
  return rc;
}

static PyObject *Recorder_get_calls(PyObject *self, void *closure) {
  Recorder *r = (Recorder *)self;
  if (rec_flush(r) < 0) return NULL;
  return Py_NewRef(r->calls);
}

static PyObject *Recorder_get_count(PyObject *self, void *closure) {
  Recorder *r = (Recorder *)self;
  return PyLong_FromUnsignedLongLong(__atomic_load_n(&r->count, __ATOMIC_RELAXED));
}

/* The Python path's launcher(grid, stream, args): counted like the C entries, and
   recorded as ("python", grid, stream, args) only where ``keep`` asks for it. */
static PyObject *Recorder_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
  Recorder *r = (Recorder *)self;
  if (PyVectorcall_NARGS(nargsf) != 3 || kw) return PyErr_Format(PyExc_TypeError, "launcher(grid, stream, args)");
  int keep = rec_counted(r);
  if (keep < 0) return NULL;
  if (keep == 0) Py_RETURN_NONE;
  PyObject *rec = Py_BuildValue("(sOOO)", "python", args[0], args[1], args[2]);
  if (!rec || PyList_Append(r->calls, rec) < 0) {
    Py_XDECREF(rec);
    return NULL;
  }
  Py_DECREF(rec);
  Py_RETURN_NONE;
}

static void rec_capsule_destructor(PyObject *cap) { Py_XDECREF((PyObject *)PyCapsule_GetContext(cap)); }

static PyObject *Recorder_capsule(PyObject *self, void *closure) {
  PyObject *cap = PyCapsule_New(&((Recorder *)self)->tj, TJ_LAUNCH_CAPSULE, rec_capsule_destructor);
  if (!cap) return NULL;
  Py_INCREF(self);
  PyCapsule_SetContext(cap, self);
  return cap;
}

static PyObject *Recorder_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"keep", "tuples", "layout", "check_layout", NULL};
  int keep = 1, tuples = 1, check = 1;
  PyObject *layout = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$ppOp", kwlist, &keep, &tuples, &layout, &check)) return NULL;
  Recorder *r = (Recorder *)type->tp_alloc(type, 0);
  if (!r) return NULL;
  if (layout != Py_None) { /* ((offset, code), ...) per kernel parameter */
    PyObject *seq = PySequence_Fast(layout, "layout must be a sequence of (offset, code) pairs");
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    if (seq != NULL && n > MAXP) PyErr_Format(PyExc_ValueError, "layout: at most %d parameters", MAXP);
    for (Py_ssize_t p = 0; seq != NULL && !PyErr_Occurred() && p < n; p++) {
      unsigned int off, code;
      if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, p), "II", &off, &code)) break;
      /* check_layout=False keeps a bad slot (up to 65535, 255): tests that callers refuse it */
      if ((check && (off + 16 > TJ_PACK_BUF_MAX || code > TJ_PACK_B8)) || off > 0xFFFF || code > 0xFF)
        PyErr_Format(PyExc_ValueError, "layout: slot %zd (%u, %u) is out of range", p, off, code);
      r->layout[p] = (tj_pack_slot){(uint16_t)off, (uint8_t)code, 0};
    }
    Py_XDECREF(seq);
    if (PyErr_Occurred()) {
      Py_DECREF(r);
      return NULL;
    }
    r->n_layout = n;
  }
  r->keep = keep;
  r->vectorcall = Recorder_vectorcall;
  r->calls = PyList_New(0);
  r->tj.abi = TJ_LAUNCH_ABI;
  r->tj.flags = TJ_LAUNCH_F_NOGIL | (tuples ? TJ_LAUNCH_F_TUPLES : 0u);
  r->tj.self = r;
  r->tj.launch = rec_launch;
  /* a counting recorder answers the stream in C, as a vendor launcher does (the recording
     backend's hook gives the same 1000 + device), so a benchmark of the native path times
     the dispatcher, not a Python hook call per launch; a keeping one leaves it to the hook,
     whose Python path the tests exercise */
  r->tj.current_stream = keep ? NULL : rec_current_stream;
  r->tj.launch_nogil = rec_launch_nogil;
  if (r->n_layout > 0) {
    r->tj.flags |= TJ_LAUNCH_F_PACKED;
    r->tj.layout = r->layout;
    r->tj.n_layout = r->n_layout;
    r->tj.launch_packed = rec_launch_packed;
    r->tj.launch_packed_nogil = rec_launch_packed_nogil;
  }
  pthread_mutex_init(&r->mu, NULL);
  return (PyObject *)r;
}
static void Recorder_dealloc(PyObject *self) {
  Recorder *r = (Recorder *)self;
  Py_XDECREF(r->calls);
  free(r->pending);
  pthread_mutex_destroy(&r->mu);
  Py_TYPE(self)->tp_free(self);
}
static PyGetSetDef Recorder_getset[] = {
    {"tritonjit_launch", Recorder_capsule, NULL, "launch entry capsule"},
    {"calls", Recorder_get_calls, NULL, "recorded launches: (path, grid, stream, args) with path 'python', 'native' "
                                        "or 'nogil'; 'packed' for a buffer its caller packed (args: (code, value) "
                                        "per parameter, None where skipped)"},
    {"count", Recorder_get_count, NULL, "every launch, through the C entries or the Python path "
                                        "(Recorder(keep=False) only counts them)"},
    {NULL}};
static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tritonjit._native._dispatch.Recorder",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Recorder, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = Recorder_new,
    .tp_dealloc = Recorder_dealloc,
    .tp_getset = Recorder_getset,
    .tp_doc = "Recorder(*, keep=True, tuples=True, layout=None, check_layout=True): records launches (tests of the "
              "native path without an accelerator); keep=False only counts them, tuples=False leaves TJ_LAUNCH_F_TUPLES "
              "out, a layout ((offset, code) per kernel parameter) offers TJ_LAUNCH_F_PACKED; check_layout=False keeps "
              "slots out of range (tests that callers refuse such a layout)",
};

int tj_add_recorder(PyObject *module) {
  if (PyType_Ready(&RecorderType) < 0) return -1;
  Py_INCREF(&RecorderType);
  if (PyModule_AddObject(module, "Recorder", (PyObject *)&RecorderType) < 0) {
    Py_DECREF(&RecorderType);
    return -1;
  }
  return 0;
}
