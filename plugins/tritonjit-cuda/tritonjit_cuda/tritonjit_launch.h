/* tritonjit native launch ABI, version 1.
 *
 * The core's C dispatcher (_dispatch.c) binds a call's arguments, computes the
 * variant key and finds the variant; a backend plugin that wants the call to reach
 * its driver without another Python-level call exposes, on the launcher returned by
 * its ``make_launcher`` hook, an attribute ``tritonjit_launch``: a PyCapsule named
 * TJ_LAUNCH_CAPSULE whose pointer is a ``tj_launch``. The capsule must keep the
 * launcher (and so ``self``) alive.
 *
 * Backend-neutral on purpose: arguments arrive already digested (a tensor as its
 * data pointer, an int as int64/uint64, a float as double), in kernel parameter
 * order, constexpr parameters included (kind TJ_ARG_CONST). The plugin keeps its
 * own list of which parameters are runtime arguments of the variant and how the
 * device ABI wants them packed.
 *
 * A plugin copies this header (it is small and versioned); a change of layout
 * changes TJ_LAUNCH_ABI and the capsule name, so a mismatch is detected, never
 * misread. Fields added at the end are announced by a bit of ``flags`` and read only
 * when it is set, so an older plugin (a shorter struct) stays valid.
 *
 * Who makes the device current: the launcher. ``launch`` and ``launch_nogil`` are
 * called on whatever thread and context the caller has; a plugin whose driver needs
 * a current device or context enters its own for the launch and restores the
 * caller's afterwards.
 */
#ifndef TRITONJIT_LAUNCH_H
#define TRITONJIT_LAUNCH_H

#include <Python.h>
#include <stdint.h>

#define TJ_LAUNCH_ABI 1
#define TJ_LAUNCH_CAPSULE "tritonjit.launch.v1"

enum tj_arg_kind {
  TJ_ARG_NONE = 0,  /* Python None */
  TJ_ARG_PTR = 1,   /* an object with data_ptr(): v.u is the address */
  TJ_ARG_INT = 2,   /* a Python int in int64 range: v.i */
  TJ_ARG_UINT = 3,  /* a Python int above INT64_MAX, below 2**64: v.u */
  TJ_ARG_FLOAT = 4, /* a Python float: v.d */
  TJ_ARG_BOOL = 5,  /* a Python bool: v.i is 0 or 1 */
  TJ_ARG_CONST = 6, /* a constexpr parameter (not passed to the device) */
  TJ_ARG_OTHER = 7, /* anything else: convert ``obj`` yourself */
  TJ_ARG_TUPLE = 8, /* a tuple (only to launchers with TJ_LAUNCH_F_TUPLES): its elements are
                       the tj_arg array at v.u, _pad of them, each digested the same way
                       (a nested tuple again TJ_ARG_TUPLE); valid for the call only */
};

typedef struct tj_arg {
  int kind;
  int _pad; /* 0; for TJ_ARG_TUPLE, the number of elements */
  union {
    uint64_t u;
    int64_t i;
    double d;
  } v;
  PyObject *obj; /* borrowed: the original Python object */
} tj_arg;

typedef struct tj_launch {
  unsigned int abi; /* TJ_LAUNCH_ABI */
  unsigned int flags;
  void *self;
  /* Enqueue the variant. ``args`` holds one entry per kernel parameter. Returns 0,
   * or -1 with a Python exception set. Called with the GIL held. */
  int (*launch)(void *self, const unsigned int grid[3], uint64_t stream, const tj_arg *args, Py_ssize_t nargs);
  /* Optional (may be NULL): the raw handle of the stream launches on ``device``
   * go to by default. Returns 0, or -1 with a Python exception set. */
  int (*current_stream)(void *self, int device, uint64_t *out);
  /* Present when ``flags & TJ_LAUNCH_F_NOGIL``: the same launch, callable WITHOUT
   * the GIL (the C++ API calls it from C++ threads and from torch operator kernels,
   * where Python is not held). It must not touch Python objects: ``obj`` of each
   * argument may be NULL. Returns 0 when launched; 1 when it cannot launch these
   * arguments without Python (e.g. a TJ_ARG_OTHER argument, or a scratch buffer
   * that Python allocates): the caller takes the GIL and calls ``launch`` instead;
   * -1 on an error, with a message (NUL-terminated, at most ``errlen`` bytes
   * including the NUL) in ``err``. */
  int (*launch_nogil)(void *self, const unsigned int grid[3], uint64_t stream, const tj_arg *args,
                      Py_ssize_t nargs, char *err, size_t errlen);
  /* ---- present when ``flags & TJ_LAUNCH_F_PACKED`` (see tj_pack_slot) ---- */
  const struct tj_pack_slot *layout; /* one slot per kernel parameter, ``n_layout`` of them */
  Py_ssize_t n_layout;
  /* The launch of a parameter buffer the caller packed by ``layout`` (TJ_PACK_BUF_MAX
   * bytes, 16-aligned): the launcher writes what it owns (scratch pointers) into it
   * and launches. Same returns as ``launch`` (GIL held) and ``launch_nogil`` (no GIL;
   * 1: the caller packs again through ``launch`` or ``launch_nogil``). */
  int (*launch_packed)(void *self, const unsigned int grid[3], uint64_t stream, unsigned char *buf);
  int (*launch_packed_nogil)(void *self, const unsigned int grid[3], uint64_t stream, unsigned char *buf,
                             char *err, size_t errlen);
} tj_launch;

/* flags */
#define TJ_LAUNCH_F_NOGIL 1u /* ``launch_nogil`` is present */
/* ``launch`` takes tuple arguments as TJ_ARG_TUPLE (their device leaves read from the
 * elements, as the variant's signature lays them out); without this flag a call with a
 * tuple argument never reaches the C entry. Additive: no ABI change. */
#define TJ_LAUNCH_F_TUPLES 2u
/* ``layout``, ``n_layout``, ``launch_packed`` and ``launch_packed_nogil`` are present:
 * the caller may pack the device parameters itself, in the same pass that keys the
 * call, instead of handing over tj_args for the launcher to pack in a second pass.
 * Additive: a caller that ignores it launches as before. */
#define TJ_LAUNCH_F_PACKED 4u

/* How a caller packs one kernel parameter into the launcher's parameter buffer.
 *
 * A launcher offers a layout only where every device parameter is a plain parameter
 * (no tuple element, no tensor descriptor) of one of these codes. The caller writes
 * each parameter's value as 8 little-endian bytes at ``offset`` (a 4-byte value in the
 * low half, the rest zero), in parameter order: a write may spill into the bytes
 * after the value, which the next parameter's write (at a higher offset), the
 * launcher's scratch pointers or unused padding cover; the buffer has room for the
 * last spill. A TJ_PACK_SKIP slot's offset points past the parameters, so a caller may
 * write it unconditionally. The caller checks the value against the code (an int
 * outside I32's range, a float for a pointer, ...) and packs through ``launch`` or
 * ``launch_nogil`` instead where it does not fit, so that the launcher raises its
 * precise error. */
enum tj_pack_code {
  TJ_PACK_SKIP = 0, /* not a device parameter (a constexpr, an int specialized to 1, None) */
  TJ_PACK_PTR = 1,  /* 8 bytes: a data pointer (TJ_ARG_PTR) */
  TJ_PACK_I32 = 2,  /* 4 bytes: an int in [-2**31, 2**31) */
  TJ_PACK_I64 = 3,  /* 8 bytes: an int in [-2**63, 2**63) */
  TJ_PACK_U64 = 4,  /* 8 bytes: an int in [0, 2**64) */
  TJ_PACK_FP32 = 5, /* 4 bytes: a float rounded to fp32 */
  TJ_PACK_FP64 = 6, /* 8 bytes: a float */
  TJ_PACK_B8 = 7,   /* 1 byte: a bool, 0 or 1 */
};
typedef struct tj_pack_slot {
  uint16_t offset;
  uint8_t code; /* tj_pack_code */
  uint8_t _pad;
} tj_pack_slot;
/* The size of a caller's parameter buffer: every layout's parameters, scratch pointers
 * and spill fit (a launcher offers no layout where they would not). */
#define TJ_PACK_BUF_MAX 2112
/* Whether a caller of ``nparams`` parameters may pack by ``tj``'s layout: the flag set, a
 * slot per parameter, every code known and every offset leaving room for an 8-byte write
 * and its spill inside TJ_PACK_BUF_MAX. A caller checks once per launcher (a layout never
 * changes), so that no launcher's layout can make it write outside its buffer. */
static inline int tj_pack_layout_ok(const struct tj_launch *tj, Py_ssize_t nparams) {
  if (!(tj->flags & TJ_LAUNCH_F_PACKED) || tj->layout == NULL || tj->n_layout < nparams) return 0;
  for (Py_ssize_t p = 0; p < nparams; p++)
    if (tj->layout[p].code > TJ_PACK_B8 || tj->layout[p].offset > TJ_PACK_BUF_MAX - 16) return 0;
  return 1;
}

/* Whether a digested argument fits a slot of ``code`` as the launcher would pack it: a
 * pointer for PTR; an int in the code's range (any int for a SKIP slot: one specialized
 * to 1); a float for FP32 or FP64; a bool for B8; None for SKIP or PTR (a null pointer).
 * Anything else (an int for a float, a float for an int, ...) is the launcher's to
 * convert or refuse through ``launch`` / ``launch_nogil``. The C++ API's Packer
 * (include/tritonjit/function.h) spells these rules and tj_pack_write's out per kind of
 * argument: a change here changes them there. */
static inline int tj_pack_fits(int code, const tj_arg *a) {
  switch (a->kind) {
    case TJ_ARG_PTR: return code == TJ_PACK_PTR;
    case TJ_ARG_NONE: return code == TJ_PACK_SKIP || code == TJ_PACK_PTR;
    case TJ_ARG_INT:
      return code == TJ_PACK_I64 || code == TJ_PACK_SKIP || (code == TJ_PACK_U64 && a->v.i >= 0) ||
             (code == TJ_PACK_I32 && a->v.i >= INT32_MIN && a->v.i <= INT32_MAX);
    case TJ_ARG_UINT: return code == TJ_PACK_U64;
    case TJ_ARG_FLOAT: return code == TJ_PACK_FP32 || code == TJ_PACK_FP64;
    case TJ_ARG_BOOL: return code == TJ_PACK_B8;
    default: return 0;
  }
}

/* Write a digested argument into its slot by the rules above: 8 bytes at the slot's
 * offset, an FP32 slot's float rounded to fp32 in the low half (every other value is
 * its tj_arg's 8 bytes: an int or a pointer as is, a bool 0 or 1, None 0, a float for
 * FP64). Where the argument does not fit the slot (tj_pack_fits) the bytes are
 * meaningless and the buffer must not be launched. */
static inline void tj_pack_write(const tj_pack_slot *slot, const tj_arg *a, unsigned char *buf) {
  uint64_t w = a->v.u;
  if (slot->code == TJ_PACK_FP32) {
    const float f = (float)a->v.d;
    uint32_t b;
    memcpy(&b, &f, 4);
    w = b;
  }
  memcpy(buf + slot->offset, &w, 8);
}

/* A tuple argument's element ``i`` (no check: i < a->_pad is the reader's to make). */
static inline const tj_arg *tj_arg_element(const tj_arg *a, int i) {
  return (const tj_arg *)(uintptr_t)a->v.u + i;
}

/* Digesting a Python value into a tj_arg: one definition for the core's dispatcher
 * (_dispatch.c, which also keys the call from it) and a plugin's Python-facing
 * launcher (which digests the arguments of a direct ``launcher(...)`` call), so that
 * both read a value alike.
 *
 * ``tj_digest_scalar`` digests None, a bool, an exact int and an exact float and
 * returns 1; for anything else (a tensor, an int subclass, ...) it returns 0 and
 * leaves ``a`` for the caller (the dispatcher reads a tensor through its tensor
 * reader, a launcher through ``data_ptr()``). An int outside [-2**63, 2**64) becomes
 * TJ_ARG_OTHER: the dispatcher leaves such a call to the Python path, which raises
 * the precise error; a launcher converts ``obj`` itself. Never sets a Python error. */
static inline int tj_digest_scalar(PyObject *o, tj_arg *a) {
  a->obj = o;
  a->v.u = 0;
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      a->kind = TJ_ARG_INT;
      a->v.i = v;
    } else if (overflow > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* 2**64 or more */
        a->kind = TJ_ARG_OTHER;
      } else {
        a->kind = TJ_ARG_UINT;
        a->v.u = u;
      }
    } else {
      a->kind = TJ_ARG_OTHER; /* below -2**63 */
    }
  } else if (PyFloat_CheckExact(o)) {
    a->kind = TJ_ARG_FLOAT;
    a->v.d = PyFloat_AS_DOUBLE(o);
  } else if (PyBool_Check(o)) {
    a->kind = TJ_ARG_BOOL;
    a->v.i = o == Py_True;
  } else if (o == Py_None) {
    a->kind = TJ_ARG_NONE;
  } else {
    return 0;
  }
  return 1;
}

/* ``(kind, value)`` of a digested argument, for recorders and tests: an int for
 * TJ_ARG_PTR/INT/UINT/BOOL, a float for TJ_ARG_FLOAT, a list of the elements' for
 * TJ_ARG_TUPLE, the original object (or None) otherwise. A new reference, or NULL with a Python error set. */
static inline PyObject *tj_arg_describe(const tj_arg *a) {
  switch (a->kind) {
    case TJ_ARG_PTR: case TJ_ARG_UINT: return Py_BuildValue("(iK)", a->kind, (unsigned long long)a->v.u);
    case TJ_ARG_INT: case TJ_ARG_BOOL: return Py_BuildValue("(iL)", a->kind, (long long)a->v.i);
    case TJ_ARG_FLOAT: return Py_BuildValue("(id)", a->kind, a->v.d);
    case TJ_ARG_TUPLE: { /* (kind, [element, ...]) */
      PyObject *items = PyList_New(a->_pad);
      if (items == NULL) return NULL;
      for (int i = 0; i < a->_pad; i++) {
        PyObject *e = tj_arg_describe(tj_arg_element(a, i));
        if (e == NULL) {
          Py_DECREF(items);
          return NULL;
        }
        PyList_SET_ITEM(items, i, e);
      }
      return Py_BuildValue("(iN)", a->kind, items);
    }
    default: return Py_BuildValue("(iO)", a->kind, a->obj ? a->obj : Py_None);
  }
}

#endif
