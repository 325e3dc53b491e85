// A Torch operator written in C++ on tritonjit (libtriton_jit's add_op.cpp pattern):
// torch.ops.tritonjit_example.add(x, y) = x + y for same-shape tensors, registered with
// TORCH_LIBRARY, its kernel launched through tritonjit::Function, with a backward.
#include <torch/autograd.h>
#include <torch/library.h>
#include <tritonjit/function.h>

#include <string>

namespace {

std::string kernel_file;  // set by set_kernel_file() from Python (where add_kernel.py lives)

at::Tensor add_kernel_call(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.sizes() == y.sizes(), "tritonjit_example::add: shapes differ: ", x.sizes(), " and ", y.sizes());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "tritonjit_example::add: dtypes differ");
  const at::Tensor a = x.contiguous(), b = y.contiguous();
  at::Tensor out = at::empty_like(a);
  const int64_t n = a.numel();
  if (n == 0) return out;
  auto& f = tritonjit::Function::get_instance(kernel_file, "add_kernel");
  constexpr int64_t block = 1024;
  // stream 0: the current stream of the tensors' device; grid, num_warps, num_stages, then the arguments
  f(0, static_cast<unsigned>((n + block - 1) / block), 1, 1, 4, 1, a, b, out, n, block);
  return out;
}

void set_kernel_file(std::string path) { kernel_file = std::move(path); }

// d(x + y)/dx = d(x + y)/dy = 1: both gradients are the output's
class AddFunction : public torch::autograd::Function<AddFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x, const at::Tensor& y) {
    at::AutoDispatchBelowADInplaceOrView below;
    return add_kernel_call(x, y);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*, torch::autograd::tensor_list g) {
    return {g[0], g[0]};
  }
};

at::Tensor add_autograd(const at::Tensor& x, const at::Tensor& y) { return AddFunction::apply(x, y); }

}  // namespace

TORCH_LIBRARY(tritonjit_example, m) {
  m.def("add(Tensor x, Tensor y) -> Tensor");
  m.def("set_kernel_file(str path) -> ()", set_kernel_file);
}

// one kernel for every device: tritonjit picks the backend (CPU tensors: the interpreter)
TORCH_LIBRARY_IMPL(tritonjit_example, CompositeExplicitAutograd, m) { m.impl("add", add_kernel_call); }
TORCH_LIBRARY_IMPL(tritonjit_example, Autograd, m) { m.impl("add", add_autograd); }
