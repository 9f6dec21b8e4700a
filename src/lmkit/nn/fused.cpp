#include "lmkit/nn/fused.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <tuple>

#include "../../cuda/cuda_api.h"
#include "lmkit/core/error.h"
#include "lmkit/core/runtime.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/kernels.h"
#include "lmkit/nn/linear.h"


namespace lmkit::nn {

bool fused_kernels_built() {
#ifdef LMKIT_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

namespace {
std::atomic<bool>& fused_switch() {
  static std::atomic<bool> on{fused_kernels_built() && !lever_disabled("fused")};
  return on;
}
}  // namespace

bool fused_kernels_enabled() { return fused_switch().load(std::memory_order_relaxed); }

bool set_fused_kernels_enabled(bool on) { return fused_switch().exchange(on && fused_kernels_built()); }

namespace {
std::atomic<bool>& host_switch() {
  static std::atomic<bool> on{false};
  return on;
}
}  // namespace

bool host_kernels_enabled() { return host_switch().load(std::memory_order_relaxed); }

bool set_host_kernels_enabled(bool on) { return host_switch().exchange(on); }

namespace {
std::atomic<bool>& cpu_switch() {
  static std::atomic<bool> on{!lever_disabled("cpu_fused")};
  return on;
}
}  // namespace

bool cpu_kernels_enabled() { return cpu_switch().load(std::memory_order_relaxed); }

bool set_cpu_kernels_enabled(bool on) { return cpu_switch().exchange(on); }

namespace {

at::Tensor composite_gelu(const at::Tensor& x, bool tanh_approx) { return tanh_approx ? at::gelu(x, "tanh") : at::gelu(x); }

// Whether a tensor's device takes the kernels: CUDA when built and enabled, the CPU when the
// host path is switched on.
bool takes_kernels(const at::Tensor& t) {
  if (t.is_cuda()) return fused_kernels_enabled();
  return t.is_cpu() && host_kernels_enabled();
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool kernel_dtype(const at::Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16; }

kernels::Dtype dtype_of(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat ? kernels::Dtype::kFloat : kernels::Dtype::kBFloat16;
}

// Runs the CUDA kernel for a CUDA tensor (from lmkit's CUDA module, on the tensor's device and
// its current stream) and the host version otherwise.
template <typename Gpu, typename Host>
void launch(const at::Tensor& t, Gpu&& gpu, Host&& host) {
  if (t.is_cuda() && fused_kernels_built()) {
    const detail::CudaModule& cuda = detail::cuda_module();
    const c10::DeviceGuard guard(t.device());  // the kernel launches on the tensor's device, not device 0
    gpu(cuda, cuda.current_stream(t.device().index()));
    return;
  }
  check_input(t.is_cpu(), "lmkit's fused ops: a " + t.device().str() + " tensor on a build without its kernels");
  host();
}

// A fused op's dropout: one Philox key and offset from the device's default generator (the
// one ATen's dropout draws from, which the checkpoint saves), advanced for this call; on the
// host a key from the CPU generator.
kernels::Dropout draw_dropout(double p, c10::Device device) {
  kernels::Dropout d;
  if (p <= 0) return d;
  if (device.is_cuda()) {
    const detail::CudaModule& cuda = detail::cuda_module();
    cuda.philox_inputs(device.index(), 4, &d.seed, &d.offset);
  }
  if (device.is_cpu()) {
    auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(std::nullopt, at::detail::getDefaultCPUGenerator());
    std::lock_guard<std::mutex> lock(gen->mutex_);
    d.seed = gen->random64();
    d.offset = 0;
  }
  d.threshold = static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0));
  d.scale = static_cast<float>(4294967296.0 / (4294967296.0 - static_cast<double>(d.threshold)));  // 1 / (1 − p drawn)
  return d;
}

// Dropout parameters through an autograd context (unsigned values as int64 bit patterns).
void save_dropout(AutogradContext* ctx, const kernels::Dropout& d) {
  ctx->saved_data["seed"] = static_cast<int64_t>(d.seed);
  ctx->saved_data["offset"] = static_cast<int64_t>(d.offset);
  ctx->saved_data["threshold"] = static_cast<int64_t>(d.threshold);
  ctx->saved_data["scale"] = static_cast<double>(d.scale);
}
kernels::Dropout load_dropout(AutogradContext* ctx) {
  kernels::Dropout d;
  d.seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
  d.offset = static_cast<uint64_t>(ctx->saved_data["offset"].toInt());
  d.threshold = static_cast<uint32_t>(ctx->saved_data["threshold"].toInt());
  d.scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
  return d;
}

// The CPU path's norm backward (kernels::cpu), for the residual step and the norm alone: {gx, gw,
// gb} from gy and gs (dL/ds, may be undefined) with s the norm's input; gb undefined for RMSNorm.
std::tuple<at::Tensor, at::Tensor, at::Tensor> cpu_norm_backward(const at::Tensor& gy, const at::Tensor& gs,
                                                                 const at::Tensor& s, const at::Tensor& mean,
                                                                 const at::Tensor& rstd, const at::Tensor& weight,
                                                                 bool rms) {
  const int64_t d = s.size(-1), rows = s.numel() / d;
  at::Tensor gx = at::empty(s.sizes(), s.options()), gw = at::empty({d}, mean.options());
  at::Tensor gb = rms ? at::Tensor() : at::empty({d}, mean.options());
  kernels::cpu::residual_norm_backward(gy.data_ptr<float>(), gs.defined() ? gs.data_ptr<float>() : nullptr,
                                       s.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                                       weight.data_ptr<float>(), gx.data_ptr<float>(), gw.data_ptr<float>(),
                                       rms ? nullptr : gb.data_ptr<float>(), rows, d, rms);
  return {gx, gw, gb};
}

// The residual step: the CUDA kernels, their host implementation (tests), or with `cpu` the CPU
// training path (float32, no dropout: kernels::cpu).
struct ResidualNormFunction : torch::autograd::Function<ResidualNormFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& h_in,
                               const at::Tensor& weight, const std::optional<at::Tensor>& bias, double p, double eps,
                               at::ScalarType y_type, bool cpu) {
    const at::Tensor x = x_in.contiguous(), h = h_in.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const kernels::Dropout dropout = draw_dropout(p, x.device());
    at::Tensor s = at::empty(x.sizes(), x.options().dtype(at::result_type(x, h)));
    at::Tensor y = at::empty(x.sizes(), x.options().dtype(y_type));
    at::Tensor mean = at::empty({rows}, x.options().dtype(at::kFloat)), rstd = at::empty({rows}, mean.options());
    const bool rms = !bias.has_value();
    const float* b = rms ? nullptr : bias->data_ptr<float>();
    launch(
        x,
        [&](const detail::CudaModule& cuda, void* stream) {
          cuda.residual_norm_forward(x.data_ptr(), dtype_of(x), h.data_ptr(), dtype_of(h), s.data_ptr(), dtype_of(s),
                                     y.data_ptr(), dtype_of(y), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                                     weight.data_ptr<float>(), b, rows, d, static_cast<float>(eps), rms, dropout,
                                     stream);
        },
        [&] {
          if (cpu) {
            kernels::cpu::residual_norm_forward(x.data_ptr<float>(), h.data_ptr<float>(), s.data_ptr<float>(),
                                                y.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                                                weight.data_ptr<float>(), b, rows, d, static_cast<float>(eps), rms);
            return;
          }
          kernels::host::residual_norm_forward(x.data_ptr(), dtype_of(x), h.data_ptr(), dtype_of(h), s.data_ptr(),
                                               dtype_of(s), y.data_ptr(), dtype_of(y), mean.data_ptr<float>(),
                                               rstd.data_ptr<float>(), weight.data_ptr<float>(), b, rows, d,
                                               static_cast<float>(eps), rms, dropout);
        });
    ctx->saved_data["cpu"] = cpu;
    ctx->save_for_backward({s, mean, rstd, weight});
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined: no zeros made
    save_dropout(ctx, dropout);
    ctx->saved_data["rms"] = rms;
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["h_type"] = static_cast<int64_t>(h.scalar_type());
    return {s, y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &s = saved[0], &mean = saved[1], &rstd = saved[2], &weight = saved[3];
    const bool rms = ctx->saved_data["rms"].toBool();
    const int64_t d = s.size(-1), rows = s.numel() / d;
    const at::Tensor gs = grads[0].defined() ? grads[0].to(s.scalar_type()).contiguous() : at::Tensor();
    if (ctx->saved_data["cpu"].toBool()) {  // float32 throughout; no dropout, so dL/dh = dL/dx
      const at::Tensor gy =
          grads[1].defined() ? grads[1].to(at::kFloat).contiguous() : at::zeros(s.sizes(), s.options());
      const auto [gx, gw, gb] = cpu_norm_backward(gy, gs, s, mean, rstd, weight, rms);
      return {gx, gx, gw, gb, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    // dL/dy in y's type (bf16 where y fed a linear under autocast: the kernel reads it as it came).
    const at::Tensor gy = !grads[1].defined()     ? at::zeros(s.sizes(), mean.options())
                          : kernel_dtype(grads[1]) ? grads[1].contiguous()
                                                   : grads[1].to(at::kFloat).contiguous();
    const auto x_type = static_cast<at::ScalarType>(ctx->saved_data["x_type"].toInt());
    const auto h_type = static_cast<at::ScalarType>(ctx->saved_data["h_type"].toInt());
    at::Tensor gx = at::empty(s.sizes(), s.options().dtype(x_type)), gh = at::empty(s.sizes(), s.options().dtype(h_type));
    at::Tensor gw = at::empty({d}, mean.options()), gb = rms ? at::Tensor() : at::empty({d}, mean.options());
    const void* gs_ptr = gs.defined() ? gs.data_ptr() : nullptr;
    float* gb_ptr = rms ? nullptr : gb.data_ptr<float>();
    const kernels::Dropout dropout = load_dropout(ctx);
    launch(
        s,
        [&](const detail::CudaModule& cuda, void* stream) {
          at::Tensor partials = at::empty({cuda.column_partials_size(rows, d)}, mean.options());
          cuda.residual_norm_backward(gy.data_ptr(), dtype_of(gy), gs_ptr, s.data_ptr(), dtype_of(s),
                                      mean.data_ptr<float>(), rstd.data_ptr<float>(), weight.data_ptr<float>(),
                                      gx.data_ptr(), dtype_of(gx), gh.data_ptr(), dtype_of(gh), gw.data_ptr<float>(),
                                      gb_ptr, partials.data_ptr<float>(), rows, d, rms, dropout, stream);
        },
        [&] {
          kernels::host::residual_norm_backward(gy.data_ptr(), dtype_of(gy), gs_ptr, s.data_ptr(), dtype_of(s),
                                                mean.data_ptr<float>(), rstd.data_ptr<float>(), weight.data_ptr<float>(),
                                                gx.data_ptr(), dtype_of(gx), gh.data_ptr(), dtype_of(gh),
                                                gw.data_ptr<float>(), gb_ptr, rows, d, rms, dropout);
        });
    return {gx, gh, gw, gb, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct LinearGeluFunction : torch::autograd::Function<LinearGeluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            bool tanh_approx, at::ScalarType compute) {
    // The casts autocast would make, made here: backward runs outside autocast.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const at::Tensor x2 = x.reshape({-1, x.size(-1)}).to(compute).contiguous();  // (N, in)
    // The weight cast once and kept for the backward pass (not cast again there). cuBLASLt adds
    // the bias in its epilogue; GELU is ATen's kernel, since backward needs `pre` (cuBLASLt's
    // GELU_AUX epilogue, which would write both, is not reachable through ATen).
    const at::Tensor w = weight.to(compute);
    const at::Tensor pre = at::addmm(bias.to(compute), x2, w.t());  // (N, out)
    ctx->save_for_backward({x2, w, pre});
    ctx->set_materialize_grads(false);
    ctx->saved_data["weight_type"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["tanh"] = tanh_approx;
    ctx->saved_data["bias_type"] = static_cast<int64_t>(bias.scalar_type());
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return composite_gelu(pre, tanh_approx).view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x2 = saved[0], &w = saved[1], &pre = saved[2];
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor gy = grads[0].reshape(pre.sizes()).to(pre.scalar_type()).contiguous();
    const int64_t rows = pre.size(0), d = pre.size(1);
    at::Tensor gpre = at::empty_like(pre);
    at::Tensor gbias = at::empty({d}, pre.options().dtype(at::kFloat));
    const bool tanh_approx = ctx->saved_data["tanh"].toBool();
    launch(
        pre,
        [&](const detail::CudaModule& cuda, void* stream) {
          at::Tensor partials = at::empty({cuda.column_partials_size(rows, d)}, gbias.options());
          cuda.gelu_bias_backward(gy.data_ptr(), pre.data_ptr(), gpre.data_ptr(), dtype_of(pre),
                                      gbias.data_ptr<float>(), partials.data_ptr<float>(), rows, d, tanh_approx, stream);
        },
        [&] {
          kernels::host::gelu_bias_backward(gy.data_ptr(), pre.data_ptr(), gpre.data_ptr(), dtype_of(pre),
                                            gbias.data_ptr<float>(), rows, d, tanh_approx);
        });
    const auto x_type = static_cast<at::ScalarType>(ctx->saved_data["x_type"].toInt());
    const auto weight_type = static_cast<at::ScalarType>(ctx->saved_data["weight_type"].toInt());
    at::Tensor gx = at::mm(gpre, w).to(x_type).view(ctx->saved_data["x_sizes"].toIntVector());
    at::Tensor gw = at::mm(gpre.t(), x2).to(weight_type);  // (out, in)
    const auto bias_type = static_cast<at::ScalarType>(ctx->saved_data["bias_type"].toInt());
    return {gx, gw, gbias.to(bias_type), at::Tensor(), at::Tensor()};
  }
};

at::Tensor composite_residual(const at::Tensor& x, const at::Tensor& h, double p, bool training) {
  return x + (training && p > 0 ? nn::dropout(h, p, true) : h);
}

// Whether a tensor x takes the CPU paths (kernels::cpu): a float32 CPU tensor, the paths on,
// and no autocast on the CPU (under which the composites compute in bf16).
bool cpu_path_takes(const at::Tensor& x) {
  return x.is_cpu() && x.scalar_type() == at::kFloat && cpu_kernels_enabled() && !host_kernels_enabled() &&
         !at::autocast::is_autocast_enabled(c10::DeviceType::CPU);
}

kernels::cpu::RotaryShape rotary_shape(const at::Tensor& x, const at::Tensor& cos) {
  kernels::cpu::RotaryShape shape;
  shape.batch = x.size(0);
  shape.heads = x.size(1);
  shape.t = x.size(2);
  shape.d = x.size(3);
  shape.stride_b = x.stride(0);
  shape.stride_h = x.stride(1);
  shape.stride_t = x.stride(2);
  shape.cos_per_batch = cos.size(0) > 1;
  return shape;
}

// Rotary positions on the CPU path; cos and sin take no gradient.
struct RotaryFunction : torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& cos_in,
                            const at::Tensor& sin_in) {
    const at::Tensor x = x_in.stride(3) == 1 ? x_in : x_in.contiguous();
    const at::Tensor cos = cos_in.contiguous(), sin = sin_in.contiguous();
    at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    kernels::cpu::rotary(x.data_ptr<float>(), cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<float>(),
                         rotary_shape(x, cos), false);
    ctx->save_for_backward({cos, sin});
    ctx->set_materialize_grads(false);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor g = grads[0].stride(3) == 1 ? grads[0] : grads[0].contiguous();
    at::Tensor gx = at::empty(g.sizes(), g.options().memory_format(at::MemoryFormat::Contiguous));
    kernels::cpu::rotary(g.data_ptr<float>(), saved[0].data_ptr<float>(), saved[1].data_ptr<float>(),
                         gx.data_ptr<float>(), rotary_shape(g, saved[0]), true);
    return {gx, at::Tensor(), at::Tensor()};
  }
};

// silu(gate)·up on the CPU path: gate and up are saved (the composite also keeps silu(gate)).
struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_in, const at::Tensor& up_in) {
    const at::Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
    at::Tensor y = at::empty(gate.sizes(), gate.options());
    kernels::cpu::swiglu_forward(gate.data_ptr<float>(), up.data_ptr<float>(), y.data_ptr<float>(), gate.numel());
    ctx->save_for_backward({gate, up});
    ctx->set_materialize_grads(false);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor dy = grads[0].to(at::kFloat).contiguous();
    at::Tensor dgate = at::empty_like(saved[0]), dup = at::empty_like(saved[1]);
    kernels::cpu::swiglu_backward(saved[0].data_ptr<float>(), saved[1].data_ptr<float>(), dy.data_ptr<float>(),
                                  dgate.data_ptr<float>(), dup.data_ptr<float>(), dy.numel());
    return {dgate, dup};
  }
};

// y = norm(x) alone on the CPU path (float32): the residual step's row math without a sum.
struct NormFunction : torch::autograd::Function<NormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, double eps) {
    const at::Tensor x = x_in.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    at::Tensor y = at::empty(x.sizes(), x.options());
    at::Tensor mean = at::empty({rows}, x.options()), rstd = at::empty({rows}, x.options());
    const bool rms = !bias.has_value();
    kernels::cpu::residual_norm_forward(x.data_ptr<float>(), nullptr, nullptr, y.data_ptr<float>(),
                                        mean.data_ptr<float>(), rstd.data_ptr<float>(), weight.data_ptr<float>(),
                                        rms ? nullptr : bias->data_ptr<float>(), rows, d, static_cast<float>(eps), rms);
    ctx->save_for_backward({x, mean, rstd, weight});
    ctx->saved_data["rms"] = rms;
    ctx->set_materialize_grads(false);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &mean = saved[1], &rstd = saved[2], &weight = saved[3];
    const auto [gx, gw, gb] = cpu_norm_backward(grads[0].to(at::kFloat).contiguous(), at::Tensor(), x, mean, rstd,
                                                weight, ctx->saved_data["rms"].toBool());
    return {gx, gw, gb, at::Tensor()};
  }
};

}  // namespace

at::Tensor norm_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  if (!cpu_path_takes(x) || x.dim() == 0 || x.numel() == 0 || weight.scalar_type() != at::kFloat ||
      weight.dim() != 1 || weight.size(0) != x.size(-1) || (bias.defined() && bias.scalar_type() != at::kFloat)) {
    return {};
  }
  return NormFunction::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, eps);
}

at::Tensor rotary_cpu(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  auto fits = [&](const at::Tensor& c) {  // (1|B, 1, T, hd), float32, no gradient
    return c.is_cpu() && c.scalar_type() == at::kFloat && c.dim() == 4 && !c.requires_grad() &&
           (c.size(0) == 1 || c.size(0) == x.size(0)) && c.size(1) == 1 && c.size(2) == x.size(2) &&
           c.size(3) == x.size(3);
  };
  if (!cpu_path_takes(x) || x.dim() != 4 || x.numel() == 0 || x.size(3) % 2 != 0 || !fits(cos) || !fits(sin) ||
      cos.size(0) != sin.size(0)) {
    return {};
  }
  return RotaryFunction::apply(x, cos, sin);
}

at::Tensor swiglu_cpu(const at::Tensor& gate, const at::Tensor& up) {
  static const bool lever_on = !lever_disabled("cpu_swiglu");  // this path alone off, for bench/levers.sh
  if (!lever_on || !cpu_path_takes(gate) || gate.numel() == 0 || !up.is_cpu() || up.scalar_type() != at::kFloat ||
      up.sizes() != gate.sizes()) {
    return {};
  }
  return SwigluFunction::apply(gate, up);
}

std::pair<at::Tensor, at::Tensor> residual_norm(const at::Tensor& x, const at::Tensor& h, double p, bool training,
                                                Norm& norm, bool feeds_linear) {
  const at::Tensor& w = norm->weight;
  const bool rms = norm->options.type() == NormType::kRmsNorm;
  if (takes_kernels(x) && x.device() == h.device() && x.sizes() == h.sizes() && kernel_dtype(x) &&
      kernel_dtype(h) && w.scalar_type() == at::kFloat && (rms || norm->bias.scalar_type() == at::kFloat) &&
      !(training && p >= 1.0)) {
    const std::optional<at::Tensor> bias = rms ? std::nullopt : std::optional<at::Tensor>(norm->bias);
    // y in the dtype the linear's autocast casts it to, written by the kernel: no cast kernel
    // forward, none for its gradient backward, the same bits.
    const c10::DeviceType type = x.device().type();
    const at::ScalarType y_type = feeds_linear && !lever_disabled("fused_prenorm") &&
                                          at::autocast::is_autocast_enabled(type) &&
                                          at::autocast::get_autocast_dtype(type) == at::kBFloat16
                                      ? at::kBFloat16
                                      : at::kFloat;
    const auto out =
        ResidualNormFunction::apply(x, h, w, bias, training ? p : 0.0, norm->options.eps(), y_type, false);
    return {out[0], out[1]};
  }
  if (cpu_path_takes(x) && h.is_cpu() && h.scalar_type() == at::kFloat && x.sizes() == h.sizes() && x.numel() > 0 &&
      w.scalar_type() == at::kFloat && (rms || norm->bias.scalar_type() == at::kFloat) && !(training && p > 0)) {
    const std::optional<at::Tensor> bias = rms ? std::nullopt : std::optional<at::Tensor>(norm->bias);
    const auto out = ResidualNormFunction::apply(x, h, w, bias, 0.0, norm->options.eps(), at::kFloat, true);
    return {out[0], out[1]};
  }
  at::Tensor s = composite_residual(x, h, p, training);
  at::Tensor y = norm(s);
  return {s, y};
}

at::Tensor PendingSum::sum() const { return h.defined() ? composite_residual(x, h, p, p > 0) : x; }

std::pair<at::Tensor, at::Tensor> residual_norm(const PendingSum& r, Norm& norm, bool feeds_linear) {
  if (!r.h.defined()) return {r.x, norm(r.x)};
  return residual_norm(r.x, r.h, r.p, r.p > 0, norm, feeds_linear);
}

bool defers_residual_sums(const at::Tensor& x) {
  return ((takes_kernels(x) && kernel_dtype(x)) || cpu_path_takes(x)) && !lever_disabled("fused_prenorm");
}

at::Tensor linear_gelu(torch::nn::Linear& layer, const at::Tensor& x, bool tanh_approx) {
  if (takes_kernels(x) && layer->bias.defined() && x.numel() > 0) {
    const c10::DeviceType type = x.device().type();
    const at::ScalarType compute =
        at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type) : x.scalar_type();
    if (compute == at::kFloat || compute == at::kBFloat16) {
      return LinearGeluFunction::apply(x, layer->weight, layer->bias, tanh_approx, compute);
    }
  }
  return composite_gelu(linear(layer, x), tanh_approx);
}

bool softmax_cross_entropy_applies(const at::Tensor& logits) {
  return takes_kernels(logits) && logits.dim() == 2 && kernel_dtype(logits) && logits.is_contiguous();
}

at::Tensor softmax_cross_entropy_(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& share, int64_t vocab,
                                  double smoothing) {
  check_input(softmax_cross_entropy_applies(logits), "softmax_cross_entropy_: not a chunk the fused kernel takes");
  const at::Tensor t = targets.reshape({-1}).to(at::kLong).contiguous(), s = share.to(at::kFloat).contiguous();
  at::Tensor per_row = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  const int64_t rows = logits.size(0), padded = logits.size(1);
  launch(
      logits,
      [&](const detail::CudaModule& cuda, void* stream) {
        cuda.softmax_cross_entropy(logits.data_ptr(), dtype_of(logits), t.data_ptr<int64_t>(), s.data_ptr<float>(),
                                       per_row.data_ptr<float>(), rows, vocab, padded, static_cast<float>(smoothing),
                                       stream);
      },
      [&] {
        kernels::host::softmax_cross_entropy(logits.data_ptr(), dtype_of(logits), t.data_ptr<int64_t>(),
                                             s.data_ptr<float>(), per_row.data_ptr<float>(), rows, vocab, padded,
                                             static_cast<float>(smoothing));
      });
  return per_row;
}

}  // namespace lmkit::nn
