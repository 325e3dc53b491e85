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
 * misread.
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
};

typedef struct tj_arg {
  int kind;
  int _pad;
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
} tj_launch;

#endif
