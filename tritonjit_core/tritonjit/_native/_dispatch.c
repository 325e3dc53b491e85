/* tritonjit._native._dispatch: the launch hot path of tritonjit in C (optional).
 *
 * ``f[grid](*args, **kwargs)`` with this module built is: KernelBase.__getitem__
 * (C) -> GridLaunch.__call__ (C): bind the arguments to the kernel's parameters,
 * compute the same variant key the Python binder (_specialize.py) computes, find
 * the variant (a small memo of recent keys, then the very dict the Python path
 * fills), and call the backend's C launch entry (tritonjit_launch.h) with the
 * arguments already digested. No Python-level call happens on that path.
 *
 * Anything unusual goes to the Python reference path, KernelFunction._run, with
 * the original arguments: a cache miss (compile), a heuristics/autotune kernel, an
 * argument type the fast path does not know, any error. So errors, messages and
 * cache contents are the reference path's by construction, and this file only has
 * to agree with the Python binder on keys, which tests check on random inputs.
 *
 * Backend-neutral: nothing here knows a vendor; devices come from the tensors'
 * get_device() (for backends whose tensors carry a device index).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>

#include "tritonjit_launch.h"
#include "tritonjit_tensor.h"
#include "_dispatch.h"

_Static_assert(MAXP <= 64, "bind_call keeps a 64-bit mask of the parameters bound by keyword");
#define MAXOPT 8  /* launch options (num_warps=...) handled natively */
#define MEMO_N 4  /* recent (device, key) -> variant entries */
#define MAXKW (MAXP + MAXOPT + 1) /* keyword names of a call resolved once per kwnames tuple */
#define MAXSUB 128 /* elements of all tuple arguments of one call (nested ones included) */
#define MAXDEPTH 8 /* tuples nested deeper take the Python path */

enum {
  F_CONSTEXPR = 1, F_ALIGN = 2, F_EQ1 = 4, F_CONST_PTR = 8, F_ANN_FIXED = 16, F_ANN_REMAP = 32,
};
enum { T_I32, T_I32D, T_I64, T_I64D, T_U64, T_U64D, T_I32_1, T_FP32, T_U1, T_NULLOPT, T_COUNT };

/* reads tensors without Python calls when set (set_tensor_reader); NULL: through Python */
static const tj_tensor_reader *g_reader = NULL;
static PyObject *g_reader_capsule = NULL;
/* the reader's batch companion (tritonjit_tensor.h), where one is registered for it
   (register_tensor_reader_batch); NULL: each tensor through g_reader->read */
static const tj_tensor_reader_batch *g_batch = NULL, *g_batch_registered = NULL;
static PyObject *g_batch_capsule = NULL;
/* what reader_read calls: g_batch's read_unchecked and modes_active, else g_reader's read
   and NULL (no read where g_reader is NULL) */
static int (*g_read)(PyObject *v, uint64_t *ptr, PyObject **dtype, int *device) = NULL;
static int (*g_modes_active)(void) = NULL;

/* Counts the slow paths of keying that may run Python code (a Python-level call, an
 * allocation, which may collect garbage and run finalizers): after one, a launch asks
 * the batch companion again whether a torch-function mode is active, since only Python
 * code enters one (see reader_read). The fast paths run no Python code and allocate
 * nothing. */
static uint64_t g_slow_epoch = 0;
#define SLOW_PATH() (g_slow_epoch++)

/* constexpr keys of True and False, as _specialize._constexpr_key makes them: (bool, v) */
static PyObject *g_ck_true, *g_ck_false;

static PyObject *s_data_ptr, *s_dtype, *s_get_device, *s_stream, *s_current, *s_native, *s_py_getitem;

typedef struct {
  PyObject *name;   /* interned parameter name */
  PyObject *dflt;   /* default, or NULL */
  PyObject *ann;    /* forced token (F_ANN_FIXED) */
  PyObject *remap;  /* token -> annotated token (F_ANN_REMAP) */
  int flags;
  /* the key token of each scalar class (T_I32 ... T_NULLOPT) for this parameter, its
     annotation applied (F_ANN_FIXED, F_ANN_REMAP); filled on first use (class_token_slow),
     borrowed from tok[], ann or remap, which live as long as the dispatcher. One load
     per scalar argument instead of the annotation branches and a remap dict lookup. */
  PyObject *ctok[T_COUNT];
  /* one-entry dtype cache: the pointer tokens (aligned, unaligned) of last_dtype, the
     annotation remap already applied */
  PyObject *last_dtype, *last_tok16, *last_tok;
  /* one-entry device cache: the address of the last tensor object (no reference is
     held) and its data pointer. Under unified addressing a live allocation belongs to
     one device, so the same object with the same data pointer is on the same device;
     get_device() is called again whenever either differs. */
  uintptr_t last_obj;
  uint64_t last_ptr;
  int last_dev;
} ParamSpec;

typedef struct {
  PyObject *key;     /* the key tuple, exactly the Python binder's */
  PyObject *variant; /* the Variant it maps to */
  PyObject *capsule; /* keeps ``tj`` alive */
  const tj_launch *tj;
  int device;
  Py_ssize_t nopt;
  int packs; /* its launcher's layout may be packed by (tj_pack_layout_ok, checked once) */
} Memo;

typedef struct GridLaunch GridLaunch;

typedef struct {
  PyObject_VAR_HEAD /* ob_size: the number of ps allocated */
  Py_ssize_t P;
  long div;
  uint64_t div_mask; /* div - 1 where div is a power of two (a mask, not a division), else 0 */
  int device_mode;
  PyObject *tok[T_COUNT];
  PyObject *ptr_tables[2]; /* dtype -> (aligned token, token), per pointer const-ness */
  PyObject *ptr_token_fn, *ck_fn, *annotate_fn;
  PyObject *caches;        /* device -> {key -> Variant}: the Python path's own dicts */
  PyObject *run;           /* KernelFunction._run (bound): the reference path */
  PyObject *current_device_fn, *current_stream_fn;
  PyObject *registry, *backend; /* registry: Registry.current_cell, a one-item list */
  Memo memo[MEMO_N];
  int memo_next;
  Memo *last; /* the entry of the last native launch (one of memo), or NULL */
  /* calls are expected through tp_call rather than vectorcall (see GridLaunch_call), after
     ex_streak calls in a row that CPython unpacked from a tuple and a dict */
  int tp_calls, ex_streak;
  /* ``.dtype`` of the last tensor type seen, read through its getset descriptor's C
     getter (valid while the type's version tag is unchanged; see dtype_of) */
  PyTypeObject *dt_type;
  unsigned int dt_tag;
  getter dt_get;
  void *dt_closure;
  GridLaunch *cached_gl;
  PyObject *kw_names;            /* the kwnames tuple kw_slot was resolved for (held) */
  signed char kw_slot[MAXKW];    /* per keyword of kw_names: parameter index, KW_STREAM or KW_OPTION */
  unsigned long long n_native, n_python; /* calls served natively / by the Python path */
  int elem_flags;            /* F_ALIGN, F_EQ1 as a tuple's elements are specialized (_element_rules) */
  PyObject *tuple_token_type; /* _signature.TupleToken: the key token of a tuple argument */
  ParamSpec ps[]; /* one per parameter (the object's variable part) */
} Dispatcher;

struct GridLaunch {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  Dispatcher *d;
  PyObject *grid;
};

static PyTypeObject DispatcherType, GridLaunchType, BoundLaunchType, KernelBaseType;

/* ---- helpers ------------------------------------------------------------------------ */
/* registry.current_cell[0] is this dispatcher's backend (set_backend may switch it) */
static inline int backend_is_current(Dispatcher *d) {
  PyObject *cell = d->registry;
  return PyList_CheckExact(cell) && PyList_GET_SIZE(cell) == 1 && PyList_GET_ITEM(cell, 0) == d->backend;
}

/* Equality as a tuple comparison would decide it (identity, then ==); errors -> 0. */
static inline int same(PyObject *a, PyObject *b) {
  if (a == b) return 1;
  if (Py_TYPE(a) != Py_TYPE(b)) {
    /* key parts are str tokens, exact ints, None or (type, value) tuples: parts of
       different types never compare equal, except through user-defined __eq__ */
    if (PyLong_CheckExact(a) || PyUnicode_CheckExact(a) || a == Py_None || b == Py_None) return 0;
  }
  int r = PyObject_RichCompareBool(a, b, Py_EQ);
  if (r < 0) {
    PyErr_Clear();
    return 0;
  }
  return r;
}

/* ---- tokens (must agree with _specialize.py) -------------------------------------------- */
/* divisible by the backend's divisibility (a power of two: a mask test, exact for
   negative ints in two's complement too) */
static inline int divisible_i(const Dispatcher *d, long long x) {
  return d->div_mask ? ((uint64_t)x & d->div_mask) == 0 : x % d->div == 0;
}
static inline int divisible_u(const Dispatcher *d, uint64_t x) {
  return d->div_mask ? (x & d->div_mask) == 0 : x % (uint64_t)d->div == 0;
}

/* Class (T_I32 ... T_U64D) of an int already digested (tj_digest_scalar) into ``a``; -1 for
 * an int outside [-2**63, 2**64): the Python path raises. */
static int int_class(const Dispatcher *d, int flags, const tj_arg *a) {
  int align = flags & F_ALIGN;
  if (a->kind == TJ_ARG_INT) {
    long long x = a->v.i;
    if (x >= INT32_MIN && x <= INT32_MAX) {
      if (x == 1 && (flags & F_EQ1)) return T_I32_1;
      return (align && divisible_i(d, x)) ? T_I32D : T_I32;
    }
    return (align && divisible_i(d, x)) ? T_I64D : T_I64;
  }
  if (a->kind == TJ_ARG_UINT) return (align && divisible_u(d, a->v.u)) ? T_U64D : T_U64;
  return -1;
}

/* The same for an int of one machine digit (|x| < 2**30, see compact_int): always in
 * i32 range, so one of three classes. ``mask`` is d->div_mask, passed in by the loop. */
static inline int compact_int_class(const Dispatcher *d, uint64_t mask, int flags, long long x) {
  if (x == 1 && (flags & F_EQ1)) return T_I32_1;
  if (!(flags & F_ALIGN)) return T_I32;
  return (mask ? ((uint64_t)x & mask) == 0 : x % d->div == 0) ? T_I32D : T_I32;
}

/* ``tok`` as parameter ``i``'s annotation remaps it (F_ANN_REMAP): remap[tok], made by
 * annotate_fn on first use. Borrowed (held by remap); NULL (no error set): fallback. */
static PyObject *remap_token(Dispatcher *d, Py_ssize_t i, PyObject *tok) {
  ParamSpec *ps = &d->ps[i];
  PyObject *m = PyDict_GetItemWithError(ps->remap, tok);
  if (m != NULL) return m;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return NULL;
  }
  PyObject *idx = PyLong_FromSsize_t(i);
  m = idx ? PyObject_CallFunctionObjArgs(d->annotate_fn, idx, tok, NULL) : NULL;
  Py_XDECREF(idx);
  if (m == NULL || PyDict_SetItem(ps->remap, tok, m) < 0) {
    Py_XDECREF(m);
    PyErr_Clear();
    return NULL;
  }
  Py_DECREF(m); /* held by remap */
  return m;
}

/* The key token of scalar class ``cls`` for parameter ``i``, made on its first use (see
 * ParamSpec.ctok; token_of reads it): the class's token, or the annotation's (F_ANN_FIXED:
 * the annotation, None stays nullopt; F_ANN_REMAP: remapped, nullopt never). NULL (no
 * error set): fallback. */
static PyObject *class_token_slow(Dispatcher *d, Py_ssize_t i, int cls) {
  ParamSpec *ps = &d->ps[i];
  PyObject *tok = d->tok[cls];
  SLOW_PATH();
  if (ps->flags & F_ANN_FIXED)
    tok = cls == T_NULLOPT ? tok : ps->ann;
  else if ((ps->flags & F_ANN_REMAP) && cls != T_NULLOPT)
    tok = remap_token(d, i, tok);
  if (tok != NULL) ps->ctok[cls] = tok;
  return tok;
}

/* The pointer tokens (aligned, unaligned) of a dtype, const or not, from d->ptr_tables
 * (made by ptr_token_fn on first sight). A borrowed 2-tuple; NULL (no error set): an
 * unsupported dtype or an error, the Python path says which. */
static PyObject *ptr_pair(Dispatcher *d, int is_const, PyObject *dtype) {
  PyObject *table = d->ptr_tables[is_const ? 1 : 0];
  PyObject *pair = PyDict_GetItemWithError(table, dtype);
  if (pair == NULL) {
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return NULL;
    }
    SLOW_PATH();
    pair = PyObject_CallFunctionObjArgs(d->ptr_token_fn, dtype, is_const ? Py_True : Py_False, NULL);
    if (pair == NULL) {
      PyErr_Clear();
      return NULL;
    }
    int r = PyDict_SetItem(table, dtype, pair);
    Py_DECREF(pair); /* the table holds it */
    if (r < 0) {
      PyErr_Clear();
      return NULL;
    }
  }
  if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return NULL; /* unsupported dtype */
  return pair;
}

/* Pointer tokens (aligned, unaligned) of a dtype for parameter ``i``, its annotation
 * remap applied; -1: fallback. Borrowed. */
static int ptr_tokens(Dispatcher *d, Py_ssize_t i, PyObject *dtype, PyObject **t16, PyObject **t) {
  ParamSpec *ps = &d->ps[i];
  if (dtype == ps->last_dtype) {
    *t16 = ps->last_tok16;
    *t = ps->last_tok;
    return 0;
  }
  SLOW_PATH();
  PyObject *pair = ptr_pair(d, ps->flags & F_CONST_PTR, dtype);
  if (pair == NULL) return -1;
  PyObject *a16 = PyTuple_GET_ITEM(pair, 0), *a = PyTuple_GET_ITEM(pair, 1);
  if (ps->flags & F_ANN_REMAP) { /* both now: annotate_fn is a pure function of the token */
    a16 = remap_token(d, i, a16);
    a = a16 != NULL ? remap_token(d, i, a) : NULL;
    if (a == NULL) return -1;
  }
  Py_INCREF(dtype);
  Py_XSETREF(ps->last_dtype, dtype);
  Py_INCREF(a16);
  Py_XSETREF(ps->last_tok16, a16);
  Py_INCREF(a);
  Py_XSETREF(ps->last_tok, a);
  *t16 = a16;
  *t = a;
  return 0;
}

/* ``v.dtype`` (new reference), or NULL with an error set.
 *
 * For a type whose ``dtype`` is a C getset descriptor (torch.Tensor's is) the getter
 * is called directly, skipping the generic attribute lookup. Exactly what
 * PyObject_GetAttr would do: a getset is a data descriptor, so it wins over the
 * instance dict, and the type's version tag (never reused, cleared whenever the type
 * or a base changes) proves the lookup still finds this descriptor. */
static PyObject *dtype_of(Dispatcher *d, PyObject *v) {
  PyTypeObject *tp = Py_TYPE(v);
  if (tp == d->dt_type && tp->tp_version_tag == d->dt_tag && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
    return d->dt_get(v, d->dt_closure);
  d->dt_type = NULL;
  if (tp->tp_getattro == PyObject_GenericGetAttr) {
    PyObject *descr = _PyType_Lookup(tp, s_dtype); /* borrowed; assigns a version tag */
    if (descr != NULL && Py_IS_TYPE(descr, &PyGetSetDescr_Type) && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) &&
        PyType_IsSubtype(tp, PyDescr_TYPE(descr)) && ((PyGetSetDescrObject *)descr)->d_getset->get != NULL) {
      d->dt_type = tp;
      d->dt_tag = tp->tp_version_tag;
      d->dt_get = ((PyGetSetDescrObject *)descr)->d_getset->get;
      d->dt_closure = ((PyGetSetDescrObject *)descr)->d_getset->closure;
    }
  }
  return PyObject_GetAttr(v, s_dtype);
}

/* ``v.data_ptr()`` and, unless dtype is NULL, ``v.dtype`` through Python (no tensor
 * reader, or it declined). 0 with *dtype a new reference; -1 (no error set): take
 * the Python path. */
static int read_by_python(Dispatcher *d, PyObject *v, uint64_t *ptr, PyObject **dtype) {
  SLOW_PATH();
  PyObject *p = PyObject_VectorcallMethod(s_data_ptr, &v, 1, NULL);
  if (p == NULL) {
    PyErr_Clear();
    return -1;
  }
  *ptr = PyLong_AsUnsignedLongLong(p);
  Py_DECREF(p);
  if (*ptr == (uint64_t)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  if (dtype == NULL) return 0;
  *dtype = dtype_of(d, v);
  if (*dtype == NULL) {
    PyErr_Clear();
    return -1;
  }
  return 0;
}

/* ``v.get_device()`` through Python, remembered for the last object and pointer of
 * this parameter; -1 (no error set) for a CPU tensor or any error. */
static int device_by_python(ParamSpec *ps, PyObject *v, uint64_t ptr) {
  if ((uintptr_t)v == ps->last_obj && ptr == ps->last_ptr && ptr != 0) return ps->last_dev;
  SLOW_PATH();
  PyObject *g = PyObject_VectorcallMethod(s_get_device, &v, 1, NULL);
  if (g == NULL) {
    PyErr_Clear();
    return -1;
  }
  long dev = PyLong_AsLong(g);
  Py_DECREF(g);
  if (dev < 0 || dev > INT32_MAX) {
    PyErr_Clear();
    return -1;
  }
  ps->last_obj = (uintptr_t)v;
  ps->last_ptr = ptr;
  ps->last_dev = (int)dev;
  return (int)dev;
}

/* An exact int of one machine digit (|v| < 2**30: every int a launch usually takes)
 * read without PyLong_AsLongLongAndOverflow; 0 for any other int (the caller digests it
 * with tj_digest_scalar, which gives the same value for these). */
static inline int compact_int(PyObject *v, long long *out) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact((PyLongObject *)v)) return 0;
  *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
  return 1;
#elif PY_VERSION_HEX >= 0x030B0000 /* Python.h includes cpython/longintrepr.h */
  Py_ssize_t n = Py_SIZE(v);
  if (n < -1 || n > 1) return 0;
  *out = (long long)n * (long long)((PyLongObject *)v)->ob_digit[0]; /* 0 for n == 0 */
  return 1;
#else
  (void)v, (void)out;
  return 0;
#endif
}

/* What keying one call carries from argument to argument. */
typedef struct {
  int device;           /* the tensors' device so far; -1: no tensor yet */
  uint64_t modes_clear; /* g_slow_epoch when the batch companion last answered "no mode active" */
} KeyRun;

/* One tensor through the reader. With its batch companion the torch-function-mode check
 * is made once per launch rather than per tensor: again only where a slow path (which
 * may have run Python code, and so entered a mode) ran since it last answered. */
static inline int reader_read(KeyRun *run, PyObject *v, uint64_t *ptr, PyObject **dtype, int *dev) {
  if (g_modes_active != NULL && run->modes_clear != g_slow_epoch) {
    if (g_modes_active()) return 1; /* as read would: Python reads it, the mode sees that */
    run->modes_clear = g_slow_epoch;
  }
  return g_read(v, ptr, dtype, dev);
}

/* Read a tensor argument of parameter ``i`` (at the top level or inside its tuple):
 * its data pointer into ``a``, its dtype (*dtype: borrowed from the reader, or a new
 * reference where *own_dtype; NULL where ``want_dtype`` is 0 and Python read it), and
 * its device checked against the call's. 0, or -1: take the Python path. The data
 * pointer, dtype and device are read on every call: a tensor object may be given new
 * storage (``set_``, ``.data =``) between two calls, so nothing of it is remembered by
 * identity. */
static int read_tensor_arg(Dispatcher *d, Py_ssize_t i, PyObject *v, tj_arg *a, KeyRun *run, int want_dtype,
                           PyObject **dtype, int *own_dtype) {
  ParamSpec *ps = &d->ps[i];
  int dev = -1;
  uint64_t ptr;
  *dtype = NULL;
  *own_dtype = 0;
  if (g_read == NULL || reader_read(run, v, &ptr, dtype, &dev) != 0) {
    if (read_by_python(d, v, &ptr, want_dtype ? dtype : NULL) < 0) return -1;
    *own_dtype = *dtype != NULL;
    dev = -1;
  }
  a->kind = TJ_ARG_PTR;
  a->v.u = ptr;
  if (d->device_mode) {
    if (dev < 0 && (dev = device_by_python(ps, v, ptr)) < 0) goto fail; /* a CPU tensor (or an error) */
    if (run->device < 0)
      run->device = dev;
    else if (run->device != dev)
      goto fail; /* tensors on two devices: the Python path says which */
  }
  return 0;
fail:
  if (*own_dtype) Py_DECREF(*dtype);
  return -1;
}

/* Token of a tensor argument (anything tj_digest_scalar does not take); digests it into
 * ``a`` (``a->obj`` already set). NULL: take the Python path. */
static PyObject *tensor_token(Dispatcher *d, Py_ssize_t i, PyObject *v, tj_arg *a, KeyRun *run) {
  ParamSpec *ps = &d->ps[i];
  PyObject *dtype;
  int own_dtype;
  if (read_tensor_arg(d, i, v, a, run, !(ps->flags & F_ANN_FIXED), &dtype, &own_dtype) < 0) return NULL;
  if (ps->flags & F_ANN_FIXED) {
    if (own_dtype) Py_DECREF(dtype);
    return ps->ann; /* the annotation decides the token */
  }
  PyObject *t16, *t;
  int r = ptr_tokens(d, i, dtype, &t16, &t);
  if (own_dtype) Py_DECREF(dtype);
  if (r < 0) return NULL;
  return ((ps->flags & F_ALIGN) && divisible_u(d, a->v.u)) ? t16 : t;
}

/* Token of runtime argument ``i`` (``ps`` is &d->ps[i], ``mask`` d->div_mask: the loop
 * keeps them in registers); digests it into ``a``. NULL: take the Python path.
 *
 * The hot path of a launch, once per runtime argument: the scalar kinds are told apart
 * by their exact type (the digest is tj_digest_scalar's, bit for bit), a scalar's
 * token comes from its class through ParamSpec.ctok, and anything else is a tensor. */
static inline PyObject *token_of(Dispatcher *d, Py_ssize_t i, const ParamSpec *ps, uint64_t mask, PyObject *v,
                                 tj_arg *a, KeyRun *run) {
  PyTypeObject *tp = Py_TYPE(v);
  long long x;
  int cls;
  a->obj = v;
  if (tp == &PyLong_Type && compact_int(v, &x)) { /* tj_digest_scalar's TJ_ARG_INT, sooner */
    a->kind = TJ_ARG_INT;
    a->v.i = x;
    cls = compact_int_class(d, mask, ps->flags, x);
  } else if (tp == &PyFloat_Type) {
    a->kind = TJ_ARG_FLOAT;
    a->v.d = PyFloat_AS_DOUBLE(v);
    cls = T_FP32;
  } else if (tj_digest_scalar(v, a)) { /* a bool, None or an int of more than one digit */
    switch (a->kind) {
      case TJ_ARG_BOOL: cls = T_U1; break;
      case TJ_ARG_NONE: cls = T_NULLOPT; break;
      default: /* PyLong_As* may have raised and cleared an exception (an allocation) */
        SLOW_PATH();
        cls = int_class(d, ps->flags, a);
        if (cls < 0) return NULL;
    }
  } else {
    return tensor_token(d, i, v, a, run);
  }
  PyObject *tok = ps->ctok[cls];
  return tok != NULL ? tok : class_token_slow(d, i, cls);
}

/* ---- one call -------------------------------------------------------------------------- */
typedef struct {
  /* each parameter's value: the caller's own argument array where the call passes
     every parameter positionally (nothing copied), else buf */
  PyObject *const *vals;
  PyObject *buf[MAXP];
  PyObject *opt_names[MAXOPT], *opt_vals[MAXOPT];
  Py_ssize_t nopt;
  PyObject *stream; /* borrowed; NULL or None: the backend's current stream */
} Call;

typedef struct {
  PyObject *kel[MAXP];
  tj_arg args[MAXP];
  int device;
  int differs;                 /* some part is another object than in the hint (compute_key) */
  int unfit;                   /* an annotated parameter's value does not fit its packed slot */
  int nown;                    /* how many of kel are owned (most calls: none) ... */
  unsigned char owned[MAXP];   /* ... and which */
  int nsub;                    /* elements of tuple arguments digested into sub (0: no tuple) */
  tj_arg sub[MAXSUB];          /* their tj_args: each tuple's a contiguous run (TJ_ARG_TUPLE) */
} Keyed;

static void keyed_release(Keyed *k) {
  for (int j = 0; j < k->nown; j++) Py_DECREF(k->kel[k->owned[j]]);
  k->nown = 0;
}

/* Where each keyword name of a call goes: a parameter index, or one of these. */
enum { KW_STREAM = -1, KW_OPTION = -2 };

/* The slot of each name of ``kwnames`` (KW_STREAM, KW_OPTION or a parameter index),
 * resolved as bind_call always did (``stream``, then a parameter by identity, then by
 * equality, else a launch option), and remembered for that tuple: a call site passes
 * the same kwnames tuple (a constant of its code) on every call, so the names are
 * compared once per call site, not once per call. A call through CALL_FUNCTION_EX
 * (``f[grid](*a, **kw)``, or a call site of more than 30 arguments) brings a new tuple
 * each time, of the same name objects: those are compared one by one (each is held by
 * kw_names, so an equal address is the same string), not resolved again. */
static const signed char *kw_slots(Dispatcher *d, PyObject *kwnames) {
  if (kwnames == d->kw_names) return d->kw_slot;
  Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  if (nkw > MAXKW) return NULL;
  if (d->kw_names != NULL && PyTuple_GET_SIZE(d->kw_names) == nkw) {
    Py_ssize_t k = 0;
    while (k < nkw && PyTuple_GET_ITEM(kwnames, k) == PyTuple_GET_ITEM(d->kw_names, k)) k++;
    if (k == nkw) { /* kept: the next call of a call site passing this tuple is an identity hit */
      Py_INCREF(kwnames);
      Py_SETREF(d->kw_names, kwnames);
      return d->kw_slot;
    }
  }
  for (Py_ssize_t k = 0; k < nkw; k++) {
    PyObject *name = PyTuple_GET_ITEM(kwnames, k);
    if (name == s_stream || PyUnicode_Compare(name, s_stream) == 0) {
      d->kw_slot[k] = KW_STREAM;
      continue;
    }
    Py_ssize_t j = -1;
    for (Py_ssize_t q = 0; q < d->P; q++)
      if (d->ps[q].name == name) {
        j = q;
        break;
      }
    if (j < 0)
      for (Py_ssize_t q = 0; q < d->P; q++)
        if (PyUnicode_Compare(d->ps[q].name, name) == 0) {
          j = q;
          break;
        }
    d->kw_slot[k] = j >= 0 ? (signed char)j : KW_OPTION;
  }
  if (PyErr_Occurred()) PyErr_Clear(); /* PyUnicode_Compare never fails on str; be safe */
  Py_INCREF(kwnames);
  Py_XSETREF(d->kw_names, kwnames);
  return d->kw_slot;
}

/* Bind positional + keyword arguments to parameters: ``args[:nargs]`` positional,
 * ``kwvals[k]`` the value of keyword ``kwnames[k]``. 0 ok, 1 fallback. */
static int bind_call(Dispatcher *d, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                     PyObject *const *kwvals, Call *c) {
  Py_ssize_t P = d->P;
  if (nargs > P) return 1;
  c->nopt = 0;
  c->stream = NULL;
  if (nargs == P) {
    c->vals = args; /* nothing copied; a keyword naming a parameter is a duplicate below */
  } else {
    if (nargs > 8)
      memcpy(c->buf, args, sizeof(PyObject *) * nargs);
    else /* a few pointers: cheaper than a call */
      for (Py_ssize_t i = 0; i < nargs; i++) c->buf[i] = args[i];
    c->vals = c->buf;
  }
  uint64_t by_kw = 0; /* the parameters bound by keyword (MAXP is 64) */
  if (kwnames) {
    const signed char *slot = kw_slots(d, kwnames);
    if (slot == NULL) return 1;
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
      PyObject *val = kwvals[k];
      int j = slot[k];
      if (j >= 0) {
        if (j < nargs || (by_kw >> j & 1)) return 1; /* bound twice: the Python path raises */
        by_kw |= 1ull << j;
        c->buf[j] = val;
      } else if (j == KW_STREAM) {
        c->stream = val;
      } else {
        if (c->nopt == MAXOPT) return 1;
        c->opt_names[c->nopt] = PyTuple_GET_ITEM(kwnames, k);
        c->opt_vals[c->nopt++] = val;
      }
    }
  }
  for (Py_ssize_t i = nargs; i < P; i++)
    if (!(by_kw >> i & 1)) {
      if (d->ps[i].dflt == NULL) return 1;
      c->buf[i] = d->ps[i].dflt;
    }
  return 0;
}

/* ---- tuple arguments ------------------------------------------------------------------- */
/* Token of one element of a tuple argument of parameter ``i``, digested into ``a``:
 * _specialize.py's element rules (every element specialized by value and alignment as
 * the backend's rules say, no const pointer, no annotation: d->elem_flags). Borrowed;
 * NULL: take the Python path (a nested tuple is tuple_token's, not this). */
static PyObject *element_token(Dispatcher *d, Py_ssize_t i, PyObject *v, tj_arg *a, KeyRun *run) {
  PyTypeObject *tp = Py_TYPE(v);
  long long x;
  int cls;
  a->obj = v;
  a->_pad = 0;
  if (tp == &PyLong_Type && compact_int(v, &x)) {
    a->kind = TJ_ARG_INT;
    a->v.i = x;
    cls = compact_int_class(d, d->div_mask, d->elem_flags, x);
  } else if (tp == &PyFloat_Type) {
    a->kind = TJ_ARG_FLOAT;
    a->v.d = PyFloat_AS_DOUBLE(v);
    cls = T_FP32;
  } else if (tj_digest_scalar(v, a)) {
    switch (a->kind) {
      case TJ_ARG_BOOL: cls = T_U1; break;
      case TJ_ARG_NONE: cls = T_NULLOPT; break;
      default:
        SLOW_PATH();
        cls = int_class(d, d->elem_flags, a);
        if (cls < 0) return NULL;
    }
  } else {
    PyObject *dtype;
    int own_dtype;
    if (read_tensor_arg(d, i, v, a, run, 1, &dtype, &own_dtype) < 0) return NULL;
    PyObject *pair = ptr_pair(d, 0, dtype);
    if (own_dtype) Py_DECREF(dtype);
    if (pair == NULL) return NULL;
    return PyTuple_GET_ITEM(pair, (d->elem_flags & F_ALIGN) && divisible_u(d, a->v.u) ? 0 : 1);
  }
  return d->tok[cls];
}

/* Token of an exact tuple argument of parameter ``i`` (elements nested ``depth`` deep),
 * as _specialize.tuple_token makes it: TupleToken((element tokens...), None). Its
 * elements are digested into a run of k->sub, and ``a`` becomes their TJ_ARG_TUPLE.
 *
 * ``hint`` is this argument's token in the key launched last (or NULL): where every
 * element's token equals the hint's, the hint itself is the token (borrowed, *owned 0),
 * and most launches repeat the last one's tuples; otherwise a new TupleToken is made
 * (a new reference, *owned 1). NULL: take the Python path (a namedtuple, a descriptor
 * or any other element the fast path does not know, too many elements). */
static PyObject *tuple_token(Dispatcher *d, Py_ssize_t i, PyObject *v, PyObject *hint, tj_arg *a, Keyed *k,
                             KeyRun *run, int depth, int *owned) {
  const Py_ssize_t n = PyTuple_GET_SIZE(v);
  *owned = 0;
  if (d->tuple_token_type == NULL || depth >= MAXDEPTH || n > MAXSUB - k->nsub) return NULL;
  tj_arg *sub = &k->sub[k->nsub];
  k->nsub += (int)n;
  a->kind = TJ_ARG_TUPLE;
  a->_pad = (int)n;
  a->v.u = (uint64_t)(uintptr_t)sub;
  a->obj = v;
  PyObject *hitems = NULL; /* the hint's element tokens, where it is a plain tuple's of n */
  if (hint != NULL && Py_TYPE(hint) == (PyTypeObject *)d->tuple_token_type && PyTuple_GET_SIZE(hint) == 2 &&
      PyTuple_GET_ITEM(hint, 1) == Py_None) {
    hitems = PyTuple_GET_ITEM(hint, 0);
    if (!PyTuple_CheckExact(hitems) || PyTuple_GET_SIZE(hitems) != n) hitems = NULL;
  }
  PyObject *toks[MAXSUB];
  unsigned char own[MAXSUB];
  int match = hitems != NULL;
  Py_ssize_t j;
  for (j = 0; j < n; j++) {
    PyObject *e = PyTuple_GET_ITEM(v, j), *h = hitems != NULL ? PyTuple_GET_ITEM(hitems, j) : NULL;
    int o = 0;
    PyObject *t = PyTuple_CheckExact(e) ? tuple_token(d, i, e, h, &sub[j], k, run, depth + 1, &o)
                                        : element_token(d, i, e, &sub[j], run);
    if (t == NULL) break;
    toks[j] = t;
    own[j] = (unsigned char)o;
    if (match && !(t == h || same(t, h))) match = 0;
  }
  if (j < n || match) { /* a failure, or the hint's token: nothing made here is kept */
    for (Py_ssize_t q = 0; q < j; q++)
      if (own[q]) Py_DECREF(toks[q]);
    return j < n ? NULL : hint;
  }
  SLOW_PATH();
  PyObject *items = PyTuple_New(n);
  if (items == NULL) {
    for (Py_ssize_t q = 0; q < n; q++)
      if (own[q]) Py_DECREF(toks[q]);
    PyErr_Clear();
    return NULL;
  }
  for (Py_ssize_t q = 0; q < n; q++) {
    if (!own[q]) Py_INCREF(toks[q]);
    PyTuple_SET_ITEM(items, q, toks[q]); /* an owned element's reference moves into items */
  }
  PyObject *tok = PyObject_CallOneArg(d->tuple_token_type, items);
  Py_DECREF(items);
  if (tok == NULL) {
    PyErr_Clear();
    return NULL;
  }
  *owned = 1;
  return tok;
}

/* compute_key's hint when there is none: no key part is NULL, so every part differs */
static PyObject *const no_hint[MAXP];
/* compute_key's layout when the call will not be launched packed: every value to offset 0
 * of the caller's buffer (at least 16 bytes) */
static const tj_pack_slot no_layout[MAXP];

/* The dispatcher launches a packed buffer only where the variant found is the layout's,
 * whose key equals the call's. For a parameter without annotation the same token means
 * the same kind and class (an i32 token: an int in i32 range; fp32: a float; a pointer: a
 * data pointer), so its value fits its slot's code without a check. An annotation fixes
 * the token whatever the value (``s: tl.float32`` given an int, ``q: tl.int32`` given
 * 2**40): those values alone are checked (tj_pack_fits), and one that does not fit makes
 * the call hand tj_args to the launcher, which converts it or raises its precise error. */

/* Key parts and digested args. 0 ok (caller releases), 1 fallback (released). Each
 * runtime argument is also packed into ``buf`` by ``lay`` (tj_pack_write; no_layout: unused).
 *
 * ``hint`` holds the key parts of the variant launched last (or no_hint): each part is
 * compared with it by identity on the way, and k->differs says whether any differed.
 * Most launches repeat the last one (the tokens are shared objects), so the memo is then
 * not searched; a constexpr equal to the hint's but another object only takes memo_find. */
static int compute_key(Dispatcher *d, Call *c, Keyed *k, PyObject *const *hint, const tj_pack_slot *lay,
                       unsigned char *buf) {
  /* read once: stores into k could alias them as far as the compiler knows */
  const Py_ssize_t P = d->P;
  PyObject *const *vals = c->vals;
  const uint64_t mask = d->div_mask;
  const ParamSpec *ps = d->ps;
  uintptr_t diff = 0;
  KeyRun run = {-1, g_slow_epoch - 1}; /* the modes are not known yet */
  k->nown = 0;
  k->nsub = 0;
  k->unfit = 0;
  for (Py_ssize_t i = 0; i < P; i++, ps++) {
    PyObject *v = vals[i], *kel;
    if (ps->flags & F_CONSTEXPR) {
      k->args[i].kind = TJ_ARG_CONST;
      k->args[i].obj = v;
      if (PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || v == Py_None) {
        kel = v;
      } else if (PyBool_Check(v)) {
        kel = v == Py_True ? g_ck_true : g_ck_false;
      } else {  /* (float, v) made here; anything else by _constexpr_key */
        SLOW_PATH();
        kel = PyFloat_CheckExact(v) ? PyTuple_Pack(2, (PyObject *)&PyFloat_Type, v) : PyObject_CallOneArg(d->ck_fn, v);
        if (kel == NULL) {
          PyErr_Clear();
          keyed_release(k);
          return 1;
        }
        k->owned[k->nown++] = (unsigned char)i;
      }
    } else if (Py_IS_TYPE(v, &PyTuple_Type) && !(ps->flags & (F_ANN_FIXED | F_ANN_REMAP))) {
      int owned;
      kel = tuple_token(d, i, v, hint[i], &k->args[i], k, &run, 0, &owned);
      if (kel == NULL) {
        keyed_release(k);
        return 1;
      }
      if (owned) k->owned[k->nown++] = (unsigned char)i;
    } else {
      kel = token_of(d, i, ps, mask, v, &k->args[i], &run);
      if (kel == NULL) {
        keyed_release(k);
        return 1;
      }
      tj_pack_write(&lay[i], &k->args[i], buf);
      if (ps->flags & (F_ANN_FIXED | F_ANN_REMAP)) k->unfit |= !tj_pack_fits(lay[i].code, &k->args[i]);
    }
    k->kel[i] = kel;
    diff |= (uintptr_t)kel ^ (uintptr_t)hint[i];
  }
  k->differs = diff != 0 || hint == no_hint;
  k->device = run.device;
  if (d->device_mode && k->device < 0) { /* no tensor argument: the current device */
    PyObject *r = PyObject_CallNoArgs(d->current_device_fn);
    /* a bool, a negative or a non-int (or a raising hook) goes to the Python path,
       which names the backend and the hook */
    long dev = r && !PyBool_Check(r) ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    if (dev < 0) {
      PyErr_Clear();
      keyed_release(k);
      return 1;
    }
    k->device = (int)dev;
  }
  if (!d->device_mode) k->device = 0;
  return 0;
}

/* The key tuple exactly as the Python binder builds it. */
static PyObject *build_key(Dispatcher *d, Call *c, Keyed *k) {
  Py_ssize_t P = d->P;
  PyObject *key = PyTuple_New(P + (c->nopt ? 1 : 0));
  if (!key) return NULL;
  for (Py_ssize_t i = 0; i < P; i++) {
    Py_INCREF(k->kel[i]);
    PyTuple_SET_ITEM(key, i, k->kel[i]);
  }
  if (c->nopt) {
    PyObject *opts = PyTuple_New(c->nopt);
    if (!opts) {
      Py_DECREF(key);
      return NULL;
    }
    for (Py_ssize_t j = 0; j < c->nopt; j++) {
      PyObject *pair = PyTuple_Pack(2, c->opt_names[j], c->opt_vals[j]);
      if (!pair) {
        Py_DECREF(opts);
        Py_DECREF(key);
        return NULL;
      }
      PyTuple_SET_ITEM(opts, j, pair);
    }
    PyTuple_SET_ITEM(key, P, opts);
  }
  return key;
}

/* The call's launch options are those of ``opts`` (a memo key's last item). */
static int opts_match(Call *c, PyObject *opts) {
  for (Py_ssize_t j = 0; j < c->nopt; j++) {
    PyObject *pair = PyTuple_GET_ITEM(opts, j);
    if (!same(c->opt_names[j], PyTuple_GET_ITEM(pair, 0)) || !same(c->opt_vals[j], PyTuple_GET_ITEM(pair, 1)))
      return 0;
  }
  return 1;
}

static Memo *memo_find(Dispatcher *d, Call *c, Keyed *k) {
  for (int n = 0; n < MEMO_N; n++) {
    Memo *m = &d->memo[(d->memo_next - 1 - n + MEMO_N) % MEMO_N];
    if (m->key == NULL || m->device != k->device || m->nopt != c->nopt) continue;
    PyObject **items = &PyTuple_GET_ITEM(m->key, 0);
    Py_ssize_t i;
    for (i = 0; i < d->P; i++)
      if (!same(k->kel[i], items[i])) break;
    if (i < d->P) continue;
    if (c->nopt && !opts_match(c, items[d->P])) continue;
    return m;
  }
  return NULL;
}

static void memo_clear(Memo *m) {
  Py_CLEAR(m->key);
  Py_CLEAR(m->variant);
  Py_CLEAR(m->capsule);
  m->tj = NULL;
  m->packs = 0;
}

/* Look the key up in the Python path's dict; on a hit with a native launcher,
   remember it. NULL: fallback. */
static Memo *lookup(Dispatcher *d, Call *c, Keyed *k) {
  PyObject *key = build_key(d, c, k);
  if (!key) {
    PyErr_Clear();
    return NULL;
  }
  PyObject *dev = PyLong_FromLong(k->device);
  PyObject *cache = dev ? PyDict_GetItemWithError(d->caches, dev) : NULL;
  Py_XDECREF(dev);
  PyObject *variant = cache ? PyDict_GetItemWithError(cache, key) : NULL; /* unhashable -> error */
  PyObject *cap = variant ? PyObject_GetAttr(variant, s_native) : NULL;
  if (cap == NULL || !PyCapsule_IsValid(cap, TJ_LAUNCH_CAPSULE)) {
    PyErr_Clear();
    Py_XDECREF(cap);
    Py_DECREF(key);
    return NULL;
  }
  const tj_launch *tj = (const tj_launch *)PyCapsule_GetPointer(cap, TJ_LAUNCH_CAPSULE);
  if (tj == NULL || tj->abi != TJ_LAUNCH_ABI) {
    PyErr_Clear();
    Py_DECREF(cap);
    Py_DECREF(key);
    return NULL;
  }
  Memo *m = &d->memo[d->memo_next];
  d->memo_next = (d->memo_next + 1) % MEMO_N;
  memo_clear(m);
  m->key = key;
  Py_INCREF(variant);
  m->variant = variant;
  m->capsule = cap;
  m->tj = tj;
  m->device = k->device;
  m->nopt = c->nopt;
  m->packs = tj_pack_layout_ok(tj, d->P);
  return m;
}

/* The core's grid limits (_backend.MAX_GRID: x < 2**31, y and z < 2**16): a grid
   within them is valid for every backend, so it launches from here. Anything else
   (an empty or 4-d grid, a dimension that is not an exact int, < 1 or past these
   limits) falls back to the Python path, which refuses it with GridError or, for a
   backend whose BackendInfo.max_grid is larger, launches it. The C path therefore
   never launches a grid the Python path would refuse. */
static const long long grid_max[3] = {0x7FFFFFFFll, 0xFFFFll, 0xFFFFll};

/* Grid -> 3 dims; 0 ok, 1 fallback (the Python path raises or handles it). */
static int parse_grid(Dispatcher *d, PyObject *grid, Call *c, unsigned int g[3]) {
  PyObject *owned = NULL;
  if (!PyTuple_CheckExact(grid)) {
    if (!PyCallable_Check(grid)) return 1;
    PyObject *meta = PyDict_New();
    if (!meta) goto fail;
    for (Py_ssize_t i = 0; i < d->P; i++)
      if (PyDict_SetItem(meta, d->ps[i].name, c->vals[i]) < 0) {
        Py_DECREF(meta);
        goto fail;
      }
    for (Py_ssize_t j = 0; j < c->nopt; j++)
      if (PyDict_SetItem(meta, c->opt_names[j], c->opt_vals[j]) < 0) {
        Py_DECREF(meta);
        goto fail;
      }
    owned = PyObject_CallOneArg(grid, meta);
    Py_DECREF(meta);
    if (!owned) goto fail;
    if (PyLong_CheckExact(owned)) {
      PyObject *t = PyTuple_Pack(1, owned);
      Py_DECREF(owned);
      owned = t;
      if (!owned) goto fail;
    }
    if (!PyTuple_CheckExact(owned)) goto fail;
    grid = owned;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(grid);
  if (n < 1 || n > 3) goto fail;
  g[1] = g[2] = 1;
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject *x = PyTuple_GET_ITEM(grid, k);
    if (!PyLong_CheckExact(x)) goto fail;
    long long v;
    if (!compact_int(x, &v)) v = PyLong_AsLongLong(x); /* -1 with OverflowError past int64: fails below */
    if (v < 1 || v > grid_max[k]) goto fail;
    g[k] = (unsigned int)v;
  }
  Py_XDECREF(owned);
  return 0;
fail:
  PyErr_Clear();
  Py_XDECREF(owned);
  return 1;
}

/* Dispatch a bound call. Returns the variant (new ref), NULL with an error, or
   NULL with *fallback = 1 and no error. */
static PyObject *dispatch(Dispatcher *d, PyObject *grid, Call *c, int *fallback) {
  Keyed k;
  unsigned int g[3];
  *fallback = 1;
  /* the entry launched last, whose key compute_key compares on the way (held: Python
     code run while keying may replace the memo's entries) */
  Memo *hint = d->last;
  PyObject *hkey = hint != NULL && hint->key != NULL && hint->nopt == c->nopt ? hint->key : NULL;
  Py_XINCREF(hkey);
  /* where the last launch's launcher takes a packed buffer, the arguments are packed by
     its layout while they are keyed: a call that repeats its key launches that buffer,
     without a second pass over the arguments (its capsule held: Python code run while
     keying may drop the memo's entry) */
  const tj_pack_slot *lay = no_layout;
  const tj_launch *lay_tj = NULL; /* the launcher whose layout ``lay`` is */
  PyObject *hcap = NULL;
  _Alignas(64) unsigned char buf[TJ_PACK_BUF_MAX];
  if (hkey != NULL && hint->packs) {
    lay_tj = hint->tj;
    lay = lay_tj->layout;
    hcap = Py_NewRef(hint->capsule);
  }
  if (compute_key(d, c, &k, hkey != NULL ? (PyObject *const *)&PyTuple_GET_ITEM(hkey, 0) : no_hint, lay, buf)) {
    Py_XDECREF(hkey);
    Py_XDECREF(hcap);
    return NULL;
  }
  Memo *m = NULL;
  if (hkey != NULL && !k.differs && hint->key == hkey && hint->device == k.device &&
      (c->nopt == 0 || opts_match(c, PyTuple_GET_ITEM(hkey, d->P))))
    m = hint;
  Py_XDECREF(hkey); /* still held by hint where m == hint */
  if (m == NULL) m = memo_find(d, c, &k);
  if (m == NULL) m = lookup(d, c, &k);
  keyed_release(&k);
  /* buf holds this call's parameters where the variant found is the one whose launcher's
     layout packed them: its key equals this call's, so every value fits its slot (an
     annotated parameter's value was checked: unfit). The hint is found by identity; an
     equal constexpr that is another object (a computed BLOCK, another call site's
     literal) finds the same entry through memo_find. */
  const int packed = m != NULL && lay_tj != NULL && m->tj == lay_tj && !k.unfit;
  Py_XDECREF(hcap); /* where packed, m (the memo's entry) holds the capsule */
  if (m == NULL) return NULL;
  if (k.nsub > 0 && !(m->tj->flags & TJ_LAUNCH_F_TUPLES)) return NULL; /* its launcher takes no tuples */
  d->last = m;
  /* a grid callable or the stream getter may run Python code that reuses the memo */
  PyObject *variant = m->variant, *cap = m->capsule;
  const tj_launch *tj = m->tj;
  Py_INCREF(variant);
  Py_INCREF(cap);
  uint64_t stream = 0;
  if (parse_grid(d, grid, c, g)) goto out;
  if (c->stream != NULL && c->stream != Py_None) {
    stream = PyLong_AsUnsignedLongLong(c->stream);
    if (stream == (uint64_t)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      goto out;
    }
  } else if (tj->current_stream != NULL) {
    *fallback = 0;
    if (tj->current_stream(tj->self, k.device, &stream) < 0) goto out;
  } else {
    *fallback = 0;
    PyObject *dev = PyLong_FromLong(k.device);
    PyObject *s = dev ? PyObject_CallOneArg(d->current_stream_fn, dev) : NULL;
    Py_XDECREF(dev);
    if (s && PyBool_Check(s)) {
      Py_DECREF(s);
      s = NULL;
      PyErr_SetString(PyExc_TypeError, "bool stream");
    }
    if (s) {
      stream = PyLong_AsUnsignedLongLong(s);
      Py_DECREF(s);
    }
    if (!s || (stream == (uint64_t)-1 && PyErr_Occurred())) {
      /* the hook raised or returned no stream handle: nothing was launched, so the
         Python path runs the call again and raises a HookError naming backend and hook */
      if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        *fallback = 1;
      }
      goto out;
    }
  }
  *fallback = 0;
  if (packed ? tj->launch_packed(tj->self, g, stream, buf) < 0 : tj->launch(tj->self, g, stream, k.args, d->P) < 0)
    goto out;
  d->n_native++;
  Py_DECREF(cap);
  return variant;
out:
  Py_DECREF(cap);
  Py_DECREF(variant);
  return NULL;
}

/* The reference path: KernelFunction._run(grid, *args, **kwargs), the keywords' values
 * in ``kwvals``. */
static PyObject *call_run(Dispatcher *d, PyObject *grid, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames, PyObject *const *kwvals) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, total = 1 + nargs + nkw;
  PyObject *small[1 + 2 * MAXP], **stack = small;
  if (total > (Py_ssize_t)(sizeof small / sizeof *small)) {
    stack = PyMem_Malloc(sizeof(PyObject *) * total);
    if (!stack) return PyErr_NoMemory();
  }
  d->n_python++;
  stack[0] = grid;
  memcpy(stack + 1, args, sizeof(PyObject *) * nargs);
  memcpy(stack + 1 + nargs, kwvals, sizeof(PyObject *) * nkw);
  PyObject *r = PyObject_Vectorcall(d->run, stack, 1 + nargs, kwnames);
  if (stack != small) PyMem_Free(stack);
  return r;
}

/* ---- GridLaunch: what f[grid] returns ------------------------------------------------ */
static PyObject *gridlaunch_run(GridLaunch *gl, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                PyObject *const *kwvals) {
  Dispatcher *d = gl->d;
  Call c;
  int fallback = 1;
  PyObject *grid = gl->grid;
  Py_INCREF(grid); /* gl may be reused by a nested f[grid] while we run */
  PyObject *r = NULL;
  if (bind_call(d, args, nargs, kwnames, kwvals, &c) == 0) r = dispatch(d, grid, &c, &fallback);
  if (r == NULL && fallback) r = call_run(d, grid, args, nargs, kwnames, kwvals);
  Py_DECREF(grid);
  return r;
}

/* CPython's STACK_USE_GUIDELINE (compile.c): a call site passing more than this many
 * positional arguments plus twice as many keywords is compiled to CALL_FUNCTION_EX, a
 * tuple and a dict, instead of a vectorcall. */
#define STACK_USE_GUIDELINE 30

static PyObject *GridLaunch_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  GridLaunch *gl = (GridLaunch *)self;
  Dispatcher *d = gl->d;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  /* keywords and this many arguments: CPython unpacked a tuple and a dict for us; two such
     calls in a row and the next f[grid] takes calls through tp_call (see GridLaunch_call) */
  if (kwnames != NULL && nargs + 2 * PyTuple_GET_SIZE(kwnames) > STACK_USE_GUIDELINE) {
    if (d->ex_streak < 2) d->ex_streak++;
    d->tp_calls = d->ex_streak == 2;
  } else {
    d->ex_streak = 0;
  }
  return gridlaunch_run(gl, args, nargs, kwnames, args + nargs);
}

/* f[grid](...) through tp_call: CALL_FUNCTION_EX (a call site of more than 30
 * arguments, or ``f[grid](*a, **kw)``) while ``vectorcall`` is NULL, and any caller then.
 *
 * Through the vectorcall slot, CPython would first copy the tuple and the dict of such a
 * call into a new array and a new kwnames tuple (_PyStack_UnpackDict: an allocation,
 * a reference taken and dropped per argument); here the tuple's items are bound in
 * place and the keywords read from the dict. Which slot a call takes is decided by the
 * GridLaunch (``vectorcall`` NULL or not), before the call, so the dispatcher learns
 * it from the last calls (tp_calls): two big calls with keywords in a row through
 * vectorcall set it, a small call here clears it (it came from a vectorcall call site,
 * through a tuple and a dict that CPython made for it: _PyObject_MakeTpCall). A kernel
 * called alternately from a big and a small call site so stays on vectorcall. Either
 * slot gives the same result. */
static PyObject *GridLaunch_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  GridLaunch *gl = (GridLaunch *)self;
  Dispatcher *d = gl->d;
  Py_ssize_t nargs = PyTuple_GET_SIZE(args), nkw = kwargs != NULL ? PyDict_GET_SIZE(kwargs) : 0;
  PyObject *const *argv = &PyTuple_GET_ITEM(args, 0);
  if (nargs + 2 * nkw <= STACK_USE_GUIDELINE) d->tp_calls = d->ex_streak = 0;
  if (nkw == 0) return gridlaunch_run(gl, argv, nargs, NULL, NULL);
  PyObject *kwvals[MAXKW], *names[MAXKW], *key, *val, *r = NULL;
  if (nkw <= MAXKW) {
    /* the dict's names are those of the last call's kwnames (kw_names) when they are the
       same objects in the same order: no tuple is made then */
    PyObject *kwnames = d->kw_names;
    int same_names = kwnames != NULL && PyTuple_GET_SIZE(kwnames) == nkw, all_str = 1;
    Py_ssize_t pos = 0, j = 0;
    while (j < nkw && PyDict_Next(kwargs, &pos, &key, &val)) {
      same_names = same_names && PyTuple_GET_ITEM(kwnames, j) == key;
      all_str = all_str && PyUnicode_Check(key);
      names[j] = key;
      kwvals[j++] = Py_NewRef(val); /* held: Python code run by the call could change the dict */
    }
    if (j == nkw && all_str) {
      if (same_names) {
        Py_INCREF(kwnames);
      } else {
        kwnames = PyTuple_New(nkw);
        for (Py_ssize_t k = 0; kwnames != NULL && k < nkw; k++) PyTuple_SET_ITEM(kwnames, k, Py_NewRef(names[k]));
      }
      if (kwnames != NULL) {
        r = gridlaunch_run(gl, argv, nargs, kwnames, kwvals);
        Py_DECREF(kwnames);
      }
      for (Py_ssize_t k = 0; k < nkw; k++) Py_DECREF(kwvals[k]);
      return r;
    }
    for (Py_ssize_t k = 0; k < j; k++) Py_DECREF(kwvals[k]);
  }
  /* too many keywords, or one that is no str: the reference path (which raises) */
  PyObject *small[1 + MAXP], **stack = small;
  if (1 + nargs > (Py_ssize_t)(sizeof small / sizeof *small)) {
    stack = PyMem_Malloc(sizeof(PyObject *) * (1 + nargs));
    if (!stack) return PyErr_NoMemory();
  }
  d->n_python++;
  stack[0] = gl->grid;
  memcpy(stack + 1, argv, sizeof(PyObject *) * nargs);
  Py_INCREF(stack[0]);
  r = PyObject_VectorcallDict(d->run, stack, 1 + nargs, kwargs);
  Py_DECREF(stack[0]);
  if (stack != small) PyMem_Free(stack);
  return r;
}

static PyObject *gridlaunch_for(Dispatcher *d, PyObject *grid) {
  /* the slot the next call will come through (see GridLaunch_call) */
  vectorcallfunc vc = d->tp_calls ? NULL : GridLaunch_vectorcall;
  GridLaunch *gl = d->cached_gl;
  if (gl != NULL && Py_REFCNT(gl) == 1) { /* nobody else holds it: reuse */
    Py_INCREF(grid);
    Py_XSETREF(gl->grid, grid);
    gl->vectorcall = vc;
    Py_INCREF(gl);
    return (PyObject *)gl;
  }
  gl = PyObject_GC_New(GridLaunch, &GridLaunchType);
  if (!gl) return NULL;
  gl->vectorcall = vc;
  Py_INCREF(d);
  gl->d = d;
  Py_INCREF(grid);
  gl->grid = grid;
  PyObject_GC_Track(gl);
  if (d->cached_gl == NULL) {
    Py_INCREF(gl);
    d->cached_gl = gl;
  }
  return (PyObject *)gl;
}

static int GridLaunch_traverse(PyObject *self, visitproc visit, void *arg) {
  GridLaunch *gl = (GridLaunch *)self;
  Py_VISIT(gl->d);
  Py_VISIT(gl->grid);
  return 0;
}
static int GridLaunch_clear(PyObject *self) {
  GridLaunch *gl = (GridLaunch *)self;
  Py_CLEAR(gl->d);
  Py_CLEAR(gl->grid);
  return 0;
}
static void GridLaunch_dealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  GridLaunch_clear(self);
  PyObject_GC_Del(self);
}

static PyTypeObject GridLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tritonjit._native._dispatch.GridLaunch",
    .tp_basicsize = sizeof(GridLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(GridLaunch, vectorcall),
    .tp_call = GridLaunch_call,
    .tp_traverse = GridLaunch_traverse,
    .tp_clear = GridLaunch_clear,
    .tp_dealloc = GridLaunch_dealloc,
    .tp_doc = "f[grid]: call it with the kernel's arguments to launch.",
};

/* ---- BoundLaunch: f.bind(grid, *args, **kwargs); call with the runtime args only ------ */
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  Dispatcher *d;
  Py_ssize_t P;
  PyObject *grid;
  Call c;                 /* template: constexprs, options, stream (all owned) */
  Py_ssize_t nrt;
  int rt[MAXP];           /* indices of the runtime (non-constexpr) parameters */
  PyObject *fb_kwnames;   /* option names (+ "stream") for the reference path */
} BoundLaunch;

static PyObject *BoundLaunch_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  BoundLaunch *b = (BoundLaunch *)self;
  Dispatcher *d = b->d;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != b->nrt || kwnames != NULL) {
    PyObject *names = PyList_New(0);
    for (Py_ssize_t k = 0; names && k < b->nrt; k++) PyList_Append(names, d->ps[b->rt[k]].name);
    PyErr_Format(PyExc_TypeError, "a bound launcher takes the kernel's runtime arguments %R positionally, got %zd%s",
                 names, nargs, kwnames ? " and keywords" : "");
    Py_XDECREF(names);
    return NULL;
  }
  Call c = b->c;
  c.vals = c.buf;
  for (Py_ssize_t k = 0; k < nargs; k++) c.buf[b->rt[k]] = args[k];
  int fallback = 1;
  PyObject *r = NULL;
  if (backend_is_current(d)) r = dispatch(d, b->grid, &c, &fallback);
  if (r == NULL && fallback) {
    Py_ssize_t nkw = b->fb_kwnames ? PyTuple_GET_SIZE(b->fb_kwnames) : 0;
    PyObject *stack[MAXP + MAXOPT + 1];
    memcpy(stack, c.buf, sizeof(PyObject *) * d->P);
    for (Py_ssize_t j = 0; j < c.nopt; j++) stack[d->P + j] = c.opt_vals[j];
    if (nkw > c.nopt) stack[d->P + c.nopt] = c.stream;
    r = call_run(d, b->grid, stack, d->P, b->fb_kwnames, stack + d->P);
  }
  return r;
}

static int BoundLaunch_traverse(PyObject *self, visitproc visit, void *arg) {
  BoundLaunch *b = (BoundLaunch *)self;
  Py_VISIT(b->d);
  Py_VISIT(b->grid);
  Py_VISIT(b->fb_kwnames);
  return 0;
}
static int BoundLaunch_clear(PyObject *self) {
  BoundLaunch *b = (BoundLaunch *)self;
  for (Py_ssize_t i = 0; i < b->P; i++) Py_CLEAR(b->c.buf[i]);
  b->P = 0;
  for (Py_ssize_t j = 0; j < b->c.nopt; j++) {
    Py_CLEAR(b->c.opt_names[j]);
    Py_CLEAR(b->c.opt_vals[j]);
  }
  b->c.nopt = 0;
  Py_CLEAR(b->c.stream);
  Py_CLEAR(b->d);
  Py_CLEAR(b->grid);
  Py_CLEAR(b->fb_kwnames);
  return 0;
}
static void BoundLaunch_dealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  BoundLaunch_clear(self);
  PyObject_GC_Del(self);
}

static PyObject *BoundLaunch_get_params(PyObject *self, void *closure) {
  BoundLaunch *b = (BoundLaunch *)self;
  PyObject *t = PyTuple_New(b->nrt);
  for (Py_ssize_t k = 0; t && k < b->nrt; k++) {
    Py_INCREF(b->d->ps[b->rt[k]].name);
    PyTuple_SET_ITEM(t, k, b->d->ps[b->rt[k]].name);
  }
  return t;
}

static PyGetSetDef BoundLaunch_getset[] = {
    {"params", BoundLaunch_get_params, NULL, "names of the runtime arguments the call takes, in order"}, {NULL}};

static PyTypeObject BoundLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tritonjit._native._dispatch.BoundLaunch",
    .tp_basicsize = sizeof(BoundLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(BoundLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = BoundLaunch_traverse,
    .tp_clear = BoundLaunch_clear,
    .tp_dealloc = BoundLaunch_dealloc,
    .tp_getset = BoundLaunch_getset,
    .tp_doc = "A launcher with grid, constexprs and options fixed: call it with the runtime arguments.",
};

/* ---- Dispatcher --------------------------------------------------------------------- */
static int Dispatcher_traverse(PyObject *self, visitproc visit, void *arg) {
  Dispatcher *d = (Dispatcher *)self;
  for (Py_ssize_t i = 0; i < d->P; i++) {
    Py_VISIT(d->ps[i].dflt);
    Py_VISIT(d->ps[i].remap);
  }
  Py_VISIT(d->ptr_token_fn);
  Py_VISIT(d->ck_fn);
  Py_VISIT(d->annotate_fn);
  Py_VISIT(d->caches);
  Py_VISIT(d->run);
  Py_VISIT(d->current_device_fn);
  Py_VISIT(d->current_stream_fn);
  Py_VISIT(d->registry);
  Py_VISIT(d->backend);
  Py_VISIT(d->cached_gl);
  Py_VISIT(d->kw_names);
  Py_VISIT(d->tuple_token_type);
  for (int n = 0; n < MEMO_N; n++) {
    Py_VISIT(d->memo[n].key);
    Py_VISIT(d->memo[n].variant);
  }
  return 0;
}

static int Dispatcher_clear(PyObject *self) {
  Dispatcher *d = (Dispatcher *)self;
  for (Py_ssize_t i = 0; i < d->P; i++) {
    ParamSpec *ps = &d->ps[i];
    Py_CLEAR(ps->name);
    Py_CLEAR(ps->dflt);
    Py_CLEAR(ps->ann);
    Py_CLEAR(ps->remap);
    Py_CLEAR(ps->last_dtype);
    Py_CLEAR(ps->last_tok16);
    Py_CLEAR(ps->last_tok);
  }
  d->P = 0;
  for (int t = 0; t < T_COUNT; t++) Py_CLEAR(d->tok[t]);
  Py_CLEAR(d->ptr_tables[0]);
  Py_CLEAR(d->ptr_tables[1]);
  Py_CLEAR(d->ptr_token_fn);
  Py_CLEAR(d->ck_fn);
  Py_CLEAR(d->annotate_fn);
  Py_CLEAR(d->caches);
  Py_CLEAR(d->run);
  Py_CLEAR(d->current_device_fn);
  Py_CLEAR(d->current_stream_fn);
  Py_CLEAR(d->registry);
  Py_CLEAR(d->backend);
  Py_CLEAR(d->cached_gl);
  Py_CLEAR(d->kw_names);
  Py_CLEAR(d->tuple_token_type);
  for (int n = 0; n < MEMO_N; n++) memo_clear(&d->memo[n]);
  return 0;
}

static void Dispatcher_dealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  Dispatcher_clear(self);
  PyObject_GC_Del(self);
}

/* Dispatcher(run, caches, params, div, tokens, ptr_token_fn, ck_fn, annotate_fn,
              current_device_fn, current_stream_fn, registry, backend, device_mode, no_default
              [, elem_flags, tuple_token_type])
   params: tuple of (name, flags, default, forced_token); without tuple_token_type (None)
   every call with a tuple argument takes the Python path */
static PyObject *Dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  PyObject *run, *caches, *params, *tokens, *ptf, *ck, *ann, *cdf, *csf, *reg, *be, *nodef, *ttype = Py_None;
  long div;
  int mode, elem_flags = 0;
  if (!PyArg_ParseTuple(args, "OO!O!lO!OOOOOOOpO|iO", &run, &PyDict_Type, &caches, &PyTuple_Type, &params, &div,
                        &PyTuple_Type, &tokens, &ptf, &ck, &ann, &cdf, &csf, &reg, &be, &mode, &nodef, &elem_flags,
                        &ttype))
    return NULL;
  if (ttype != Py_None && !(PyType_Check(ttype) && PyType_IsSubtype((PyTypeObject *)ttype, &PyTuple_Type)))
    return PyErr_Format(PyExc_TypeError, "tuple_token_type must be a tuple subclass or None");
  Py_ssize_t P = PyTuple_GET_SIZE(params);
  if (P > MAXP) return PyErr_Format(PyExc_ValueError, "at most %d parameters", MAXP);
  if (PyTuple_GET_SIZE(tokens) != T_COUNT) return PyErr_Format(PyExc_ValueError, "need %d tokens", T_COUNT);
  if (div <= 0) return PyErr_Format(PyExc_ValueError, "divisibility must be positive");
  Dispatcher *d = PyObject_GC_NewVar(Dispatcher, type, P);
  if (!d) return NULL;
  memset((char *)d + sizeof(PyVarObject), 0, offsetof(Dispatcher, ps) + P * sizeof(ParamSpec) - sizeof(PyVarObject));
  for (Py_ssize_t i = 0; i < P; i++) {
    PyObject *name, *dflt, *forced;
    int flags;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, i), "UiOO", &name, &flags, &dflt, &forced)) goto fail;
    ParamSpec *ps = &d->ps[i];
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    ps->name = name;
    ps->flags = flags;
    if (dflt != nodef) {
      Py_INCREF(dflt);
      ps->dflt = dflt;
    }
    if (forced != Py_None) {
      Py_INCREF(forced);
      ps->ann = forced;
    }
    if (flags & F_ANN_REMAP) {
      ps->remap = PyDict_New();
      if (!ps->remap) goto fail;
    }
    d->P = i + 1;
  }
  d->P = P;
  d->div = div;
  d->div_mask = (div > 0 && (div & (div - 1)) == 0) ? (uint64_t)(div - 1) : 0;
  d->device_mode = mode;
  for (int t = 0; t < T_COUNT; t++) {
    d->tok[t] = PyTuple_GET_ITEM(tokens, t);
    Py_INCREF(d->tok[t]);
  }
  d->ptr_tables[0] = PyDict_New();
  d->ptr_tables[1] = PyDict_New();
  if (!d->ptr_tables[0] || !d->ptr_tables[1]) goto fail;
#define KEEP(field, obj) \
  Py_INCREF(obj);        \
  d->field = obj;
  KEEP(run, run) KEEP(caches, caches) KEEP(ptr_token_fn, ptf) KEEP(ck_fn, ck) KEEP(annotate_fn, ann)
  KEEP(current_device_fn, cdf) KEEP(current_stream_fn, csf) KEEP(registry, reg) KEEP(backend, be)
#undef KEEP
  d->elem_flags = elem_flags & (F_ALIGN | F_EQ1);
  if (ttype != Py_None) d->tuple_token_type = Py_NewRef(ttype);
  PyObject_GC_Track(d);
  return (PyObject *)d;
fail:
  PyObject_GC_Track(d);
  Py_DECREF(d);
  return NULL;
}

static PyObject *Dispatcher_subscript(PyObject *self, PyObject *grid) {
  return gridlaunch_for((Dispatcher *)self, grid);
}

/* key(*args, **kwargs) -> (key, device), or None where the call would take the
   Python path. For tests: the same code the launch path runs. */
static PyObject *Dispatcher_key(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  Dispatcher *d = (Dispatcher *)self;
  Call c;
  Keyed k;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  unsigned char buf[16];
  if (bind_call(d, args, nargs, kwnames, args + nargs, &c) || compute_key(d, &c, &k, no_hint, no_layout, buf))
    Py_RETURN_NONE;
  PyObject *key = build_key(d, &c, &k);
  keyed_release(&k);
  if (!key) return NULL;
  return Py_BuildValue("(Ni)", key, k.device);
}

/* bind(grid, *args, **kwargs) -> BoundLaunch */
static PyObject *Dispatcher_bind(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  Dispatcher *d = (Dispatcher *)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) return PyErr_Format(PyExc_TypeError, "bind(grid, *args, **kwargs) needs a grid");
  Call c;
  if (bind_call(d, args + 1, nargs - 1, kwnames, args + nargs, &c))
    return PyErr_Format(PyExc_TypeError,
                        "bind(): these arguments do not bind to the kernel's parameters (missing, duplicated or "
                        "too many), or use more than %d launch options",
                        MAXOPT);
  BoundLaunch *b = PyObject_GC_New(BoundLaunch, &BoundLaunchType);
  if (!b) return NULL;
  memset((char *)b + sizeof(PyObject), 0, sizeof(BoundLaunch) - sizeof(PyObject));
  b->vectorcall = BoundLaunch_vectorcall;
  Py_INCREF(d);
  b->d = d;
  Py_INCREF(args[0]);
  b->grid = args[0];
  b->c.nopt = c.nopt;
  b->c.vals = b->c.buf;
  b->P = d->P;
  for (Py_ssize_t i = 0; i < d->P; i++) {
    Py_INCREF(c.vals[i]);
    b->c.buf[i] = c.vals[i];
    if (!(d->ps[i].flags & F_CONSTEXPR)) b->rt[b->nrt++] = (int)i;
  }
  for (Py_ssize_t j = 0; j < c.nopt; j++) {
    Py_INCREF(c.opt_names[j]);
    Py_INCREF(c.opt_vals[j]);
    b->c.opt_names[j] = c.opt_names[j];
    b->c.opt_vals[j] = c.opt_vals[j];
  }
  int has_stream = c.stream != NULL && c.stream != Py_None;
  if (has_stream) {
    Py_INCREF(c.stream);
    b->c.stream = c.stream;
  }
  if (c.nopt || has_stream) {
    b->fb_kwnames = PyTuple_New(c.nopt + has_stream);
    if (!b->fb_kwnames) goto fail;
    for (Py_ssize_t j = 0; j < c.nopt; j++) {
      Py_INCREF(c.opt_names[j]);
      PyTuple_SET_ITEM(b->fb_kwnames, j, c.opt_names[j]);
    }
    if (has_stream) {
      Py_INCREF(s_stream);
      PyTuple_SET_ITEM(b->fb_kwnames, c.nopt, s_stream);
    }
  }
  PyObject_GC_Track(b);
  return (PyObject *)b;
fail:
  PyObject_GC_Track(b);
  Py_DECREF(b);
  return NULL;
}

static PyObject *Dispatcher_reset(PyObject *self, PyObject *unused) {
  Dispatcher *d = (Dispatcher *)self;
  for (int n = 0; n < MEMO_N; n++) memo_clear(&d->memo[n]);
  Py_RETURN_NONE;
}

static PyObject *Dispatcher_stats(PyObject *self, PyObject *unused) {
  Dispatcher *d = (Dispatcher *)self;
  return Py_BuildValue("{s:K,s:K}", "native", d->n_native, "python", d->n_python);
}

static PyMethodDef Dispatcher_methods[] = {
    {"stats", Dispatcher_stats, METH_NOARGS, "{'native': calls served in C, 'python': calls sent to _run}"},
    {"key", (PyCFunction)(void (*)(void))Dispatcher_key, METH_FASTCALL | METH_KEYWORDS,
     "key(*args, **kwargs) -> (key, device) or None (the call would take the Python path)"},
    {"bind", (PyCFunction)(void (*)(void))Dispatcher_bind, METH_FASTCALL | METH_KEYWORDS,
     "bind(grid, *args, **kwargs) -> a launcher taking the runtime arguments"},
    {"reset", Dispatcher_reset, METH_NOARGS, "forget the memo of recent variants"},
    {NULL}};

static PyMappingMethods Dispatcher_as_mapping = {.mp_subscript = Dispatcher_subscript};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tritonjit._native._dispatch.Dispatcher",
    .tp_basicsize = offsetof(Dispatcher, ps),
    .tp_itemsize = sizeof(ParamSpec),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Dispatcher_new,
    .tp_traverse = Dispatcher_traverse,
    .tp_clear = Dispatcher_clear,
    .tp_dealloc = Dispatcher_dealloc,
    .tp_methods = Dispatcher_methods,
    .tp_as_mapping = &Dispatcher_as_mapping,
    .tp_doc = "Binds, keys, looks up and launches the variants of one kernel on one backend.",
};

/* ---- KernelBase: the C base of KernelFunction, so f[grid] is one C call -------------- */
typedef struct {
  PyObject_HEAD
  PyObject *dispatcher; /* a Dispatcher, or NULL: use the Python __getitem__ path */
} KernelBase;

static PyObject *KernelBase_subscript(PyObject *self, PyObject *grid) {
  Dispatcher *d = (Dispatcher *)((KernelBase *)self)->dispatcher;
  if (d != NULL && backend_is_current(d)) return gridlaunch_for(d, grid);
  return PyObject_CallMethodOneArg(self, s_py_getitem, grid);
}

static PyObject *KernelBase_get_dispatcher(PyObject *self, void *closure) {
  PyObject *d = ((KernelBase *)self)->dispatcher;
  if (d == NULL) Py_RETURN_NONE;
  Py_INCREF(d);
  return d;
}
static int KernelBase_set_dispatcher(PyObject *self, PyObject *value, void *closure) {
  if (value != NULL && value != Py_None && !PyObject_TypeCheck(value, &DispatcherType)) {
    PyErr_SetString(PyExc_TypeError, "_dispatcher must be a Dispatcher or None");
    return -1;
  }
  PyObject *v = (value == Py_None) ? NULL : value;
  Py_XINCREF(v);
  Py_XSETREF(((KernelBase *)self)->dispatcher, v);
  return 0;
}
static int KernelBase_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((KernelBase *)self)->dispatcher);
  return 0;
}
static int KernelBase_clear(PyObject *self) {
  Py_CLEAR(((KernelBase *)self)->dispatcher);
  return 0;
}
static void KernelBase_dealloc(PyObject *self) {
  /* a heap subclass's subtype_dealloc drops the type reference itself */
  PyObject_GC_UnTrack(self);
  KernelBase_clear(self);
  Py_TYPE(self)->tp_free(self);
}

static PyGetSetDef KernelBase_getset[] = {
    {"_dispatcher", KernelBase_get_dispatcher, KernelBase_set_dispatcher, "the native dispatcher, or None"},
    {NULL}};
static PyMappingMethods KernelBase_as_mapping = {.mp_subscript = KernelBase_subscript};

static PyTypeObject KernelBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tritonjit._native._dispatch.KernelBase",
    .tp_basicsize = sizeof(KernelBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = KernelBase_traverse,
    .tp_clear = KernelBase_clear,
    .tp_dealloc = KernelBase_dealloc,
    .tp_getset = KernelBase_getset,
    .tp_as_mapping = &KernelBase_as_mapping,
    .tp_doc = "C base of KernelFunction: f[grid] goes straight to the native dispatcher.",
};

/* ---- module functions ------------------------------------------------------------------ */
/* the registered batch companion where it belongs to the reader in use */
static void pick_batch(void) {
  g_batch = g_reader != NULL && g_batch_registered != NULL && g_batch_registered->base == g_reader ? g_batch_registered
                                                                                                   : NULL;
  g_read = g_batch != NULL ? g_batch->read_unchecked : g_reader != NULL ? g_reader->read : NULL;
  g_modes_active = g_batch != NULL ? g_batch->modes_active : NULL;
}

static PyObject *set_tensor_reader(PyObject *mod, PyObject *cap) {
  if (cap == Py_None) {
    g_reader = NULL;
    Py_CLEAR(g_reader_capsule);
    pick_batch();
    Py_RETURN_NONE;
  }
  const tj_tensor_reader *r = PyCapsule_GetPointer(cap, TJ_TENSOR_READER_CAPSULE);
  if (r == NULL) return NULL;
  if (r->abi != TJ_TENSOR_READER_ABI || r->read == NULL)
    return PyErr_Format(PyExc_ValueError, "tensor reader ABI %d, expected %d", r->abi, TJ_TENSOR_READER_ABI);
  Py_INCREF(cap);
  Py_XSETREF(g_reader_capsule, cap);
  g_reader = r;
  pick_batch();
  Py_RETURN_NONE;
}

/* register_tensor_reader_batch(capsule or None): the batch companion of a reader; used
 * whenever that reader is the one set (now or later), so setting the reader to None
 * and back keeps it. */
static PyObject *register_tensor_reader_batch(PyObject *mod, PyObject *cap) {
  const tj_tensor_reader_batch *b = NULL;
  if (cap != Py_None) {
    b = PyCapsule_GetPointer(cap, TJ_TENSOR_READER_BATCH_CAPSULE);
    if (b == NULL) return NULL;
    if (b->abi != TJ_TENSOR_READER_BATCH_ABI || b->base == NULL || b->modes_active == NULL ||
        b->read_unchecked == NULL)
      return PyErr_Format(PyExc_ValueError, "tensor reader batch ABI %d, expected %d", b->abi,
                          TJ_TENSOR_READER_BATCH_ABI);
  }
  Py_XINCREF(cap == Py_None ? NULL : cap);
  Py_XSETREF(g_batch_capsule, cap == Py_None ? NULL : cap);
  g_batch_registered = b;
  pick_batch();
  Py_RETURN_NONE;
}

static PyObject *get_tensor_reader_batch(PyObject *mod, PyObject *unused) {
  return Py_NewRef(g_batch != NULL ? g_batch_capsule : Py_None);
}

static PyObject *get_tensor_reader(PyObject *mod, PyObject *unused) {
  return Py_NewRef(g_reader_capsule ? g_reader_capsule : Py_None);
}

/* read_tensor(t) -> (data pointer, dtype, device) as the reader sees t, or None where
 * it declines (tests compare it with t.data_ptr(), t.dtype, t.get_device()). */
static PyObject *read_tensor(PyObject *mod, PyObject *v) {
  uint64_t ptr;
  PyObject *dtype;
  int dev;
  if (g_reader == NULL || g_reader->read(v, &ptr, &dtype, &dev) != 0) Py_RETURN_NONE;
  return Py_BuildValue("(KOi)", (unsigned long long)ptr, dtype, dev);
}

/* current_stream(device_type, device) -> the reader's answer, or None (tests compare
 * it with torch's own current stream). */
static PyObject *reader_current_stream(PyObject *mod, PyObject *args) {
  int type, dev;
  uint64_t s;
  if (!PyArg_ParseTuple(args, "ii", &type, &dev)) return NULL;
  if (g_reader == NULL || g_reader->current_stream == NULL || g_reader->current_stream(type, dev, &s) != 0)
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(s);
}

/* digest_scalar(v) -> (kind, value) as the dispatcher digests a scalar argument
 * (tj_digest_scalar), or None for a value it reads as a tensor; tests compare it with
 * the CUDA plugin's digest of the same value. */
static PyObject *digest_scalar(PyObject *mod, PyObject *v) {
  tj_arg a;
  if (!tj_digest_scalar(v, &a)) Py_RETURN_NONE;
  return tj_arg_describe(&a);
}

/* call_floor(*args, **kwargs) -> None: does nothing. What a Python call of a C function
 * costs by itself with a launch's arguments (the interpreter loads them, and past 30
 * arguments builds a tuple and a dict): benchmarks set it beside f[grid](...). */
static PyObject *call_floor(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"call_floor", (PyCFunction)(void (*)(void))call_floor, METH_FASTCALL | METH_KEYWORDS,
     "call_floor(*args, **kwargs) -> None: does nothing (the cost of a Python call alone, for benchmarks)"},
    {"digest_scalar", digest_scalar, METH_O, "digest_scalar(v) -> (kind, value) of a scalar argument, or None"},
    {"set_tensor_reader", set_tensor_reader, METH_O,
     "set_tensor_reader(capsule or None): read tensor arguments through this reader (tritonjit_tensor.h)"},
    {"tensor_reader", get_tensor_reader, METH_NOARGS, "the reader's capsule in use, or None"},
    {"register_tensor_reader_batch", register_tensor_reader_batch, METH_O,
     "register_tensor_reader_batch(capsule or None): a reader's batch companion (tritonjit_tensor.h), used "
     "while that reader is set"},
    {"tensor_reader_batch", get_tensor_reader_batch, METH_NOARGS,
     "the batch companion in use (that of the reader set), or None"},
    {"read_tensor", read_tensor, METH_O, "read_tensor(t) -> (data_ptr, dtype, device) by the reader, or None"},
    {"current_stream", reader_current_stream, METH_VARARGS,
     "current_stream(device_type, device) -> the reader's current stream handle, or None"},
    {NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_dispatch", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__dispatch(void) {
#define INTERN(var, text) \
  if (!(var = PyUnicode_InternFromString(text))) return NULL;
  INTERN(s_data_ptr, "data_ptr") INTERN(s_dtype, "dtype") INTERN(s_get_device, "get_device")
  INTERN(s_stream, "stream") INTERN(s_current, "_current") INTERN(s_native, "native")
  INTERN(s_py_getitem, "_py_getitem")
#undef INTERN
  if (!(g_ck_true = PyTuple_Pack(2, (PyObject *)&PyBool_Type, Py_True))) return NULL;
  if (!(g_ck_false = PyTuple_Pack(2, (PyObject *)&PyBool_Type, Py_False))) return NULL;
  if (PyType_Ready(&DispatcherType) < 0 || PyType_Ready(&GridLaunchType) < 0 || PyType_Ready(&BoundLaunchType) < 0 ||
      PyType_Ready(&KernelBaseType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m) return NULL;
  PyModule_AddObject(m, "Dispatcher", (PyObject *)&DispatcherType);
  Py_INCREF(&DispatcherType);
  PyModule_AddObject(m, "GridLaunch", (PyObject *)&GridLaunchType);
  Py_INCREF(&GridLaunchType);
  PyModule_AddObject(m, "BoundLaunch", (PyObject *)&BoundLaunchType);
  Py_INCREF(&BoundLaunchType);
  PyModule_AddObject(m, "KernelBase", (PyObject *)&KernelBaseType);
  Py_INCREF(&KernelBaseType);
  if (tj_add_recorder(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  PyModule_AddIntConstant(m, "MAXP", MAXP);
  PyModule_AddIntConstant(m, "ABI", TJ_LAUNCH_ABI);
  PyModule_AddIntConstant(m, "F_CONSTEXPR", F_CONSTEXPR);
  PyModule_AddIntConstant(m, "F_ALIGN", F_ALIGN);
  PyModule_AddIntConstant(m, "F_EQ1", F_EQ1);
  PyModule_AddIntConstant(m, "F_CONST_PTR", F_CONST_PTR);
  PyModule_AddIntConstant(m, "F_ANN_FIXED", F_ANN_FIXED);
  PyModule_AddIntConstant(m, "F_ANN_REMAP", F_ANN_REMAP);
  return m;
}
