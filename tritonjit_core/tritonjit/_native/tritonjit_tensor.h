/* tritonjit's tensor-reader ABI: one C call that reads what the dispatcher needs
 * from a tensor argument (data pointer, dtype object, device index) without the
 * Python-level calls ``t.data_ptr()``, ``t.dtype`` and ``t.get_device()``; and one
 * that answers the framework's current stream of a device, for backend plugins
 * (the CUDA plugin's launcher asks it instead of calling into Python).
 *
 * A reader is published as a PyCapsule named TJ_TENSOR_READER_CAPSULE holding a
 * tj_tensor_reader. ``read`` returns 0 with the three outputs set, or 1 when it
 * cannot answer with certainty (not a plain tensor, a torch-function mode active,
 * no storage): the caller then asks Python, which gives the reference behaviour
 * and error. It never raises and never leaves a Python error set. ``*dtype`` is a
 * borrowed reference to the object ``t.dtype`` would return; ``*device`` is what
 * ``t.get_device()`` would return (-1 for a CPU tensor). */
#ifndef TRITONJIT_TENSOR_H
#define TRITONJIT_TENSOR_H
#include <Python.h>
#include <stdint.h>

#define TJ_TENSOR_READER_CAPSULE "tritonjit.tensor_reader.v1"
#define TJ_TENSOR_READER_ABI 1

typedef struct {
  int abi; /* TJ_TENSOR_READER_ABI */
  int (*read)(PyObject *v, uint64_t *ptr, PyObject **dtype, int *device);
  /* The native handle of the current stream of (device_type, device), where
   * device_type is torch's c10::DeviceType value (CUDA = 1, PrivateUse1 = 20): what
   * torch.cuda.current_stream(device).cuda_stream answers. 0, or 1 where it cannot
   * answer (the caller asks Python). Never raises. */
  int (*current_stream)(int device_type, int device, uint64_t *out);
} tj_tensor_reader;

/* An optional companion of a reader, for a caller that reads many tensors in a row (the
 * dispatcher: every tensor argument of a launch). ``read`` checks on each call whether
 * a torch-function mode is active (it declines then); the companion splits that check
 * from the reading, so the caller checks once and reads each tensor without it:
 * ``read_unchecked`` answers as ``read`` does for as long as ``modes_active`` would still
 * answer 0, which holds on this thread until Python code runs (only Python code enters
 * a mode). The caller asks ``modes_active`` again after anything that may have run
 * Python code. Published as a capsule named TJ_TENSOR_READER_BATCH_CAPSULE whose
 * ``base`` is the reader it belongs to. Neither function raises. */
#define TJ_TENSOR_READER_BATCH_CAPSULE "tritonjit.tensor_reader_batch.v1"
#define TJ_TENSOR_READER_BATCH_ABI 1

typedef struct {
  int abi; /* TJ_TENSOR_READER_BATCH_ABI */
  const tj_tensor_reader *base;
  int (*modes_active)(void); /* 1 where ``read`` would decline every tensor for an active mode */
  int (*read_unchecked)(PyObject *v, uint64_t *ptr, PyObject **dtype, int *device);
} tj_tensor_reader_batch;

#endif
