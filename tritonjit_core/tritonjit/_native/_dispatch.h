/* What the two sources of tritonjit._native._dispatch share (not a public header): the
 * parameter limit of the dispatcher, which the recorder's records are sized by, and the
 * recorder's registration into the module. */
#ifndef TRITONJIT_DISPATCH_INTERNAL_H
#define TRITONJIT_DISPATCH_INTERNAL_H
#include <Python.h>

#define MAXP 64 /* kernels with more parameters take the Python path */

/* Adds the Recorder type (_recorder.c) to the module: 0, or -1 with a Python error set. */
int tj_add_recorder(PyObject *module);

#endif
