// Run under a launcher (torchrun --no-python --nproc-per-node N lmkit-dist-check):
// every collective lmkit uses, and the gradient reducer, against values each rank
// can compute alone. Prints one line per check; exit 0 only when all hold.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "lmkit/core/runtime.h"
#include "lmkit/dist/group.h"
#include "lmkit/dist/reducer.h"

using namespace lmkit;

namespace {

int failures = 0;

void check(bool ok, const std::string& what, int64_t rank) {
  std::printf("rank %lld: %s %s\n", static_cast<long long>(rank), ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// A model with two layers, a weight used twice (tied) and one never used.
struct Toy : torch::nn::Module {
  at::Tensor w1, b1, w2, unused;
  explicit Toy(uint64_t seed) {
    at::manual_seed(static_cast<int64_t>(seed));
    w1 = register_parameter("w1", at::randn({5, 4}));
    b1 = register_parameter("b1", at::randn({5}));
    w2 = register_parameter("w2", at::randn({3, 5}));
    unused = register_parameter("unused", at::randn({7}));
  }
  at::Tensor loss(const at::Tensor& x) {
    at::Tensor h = at::tanh(at::linear(x, w1, b1));  // (N, 5)
    at::Tensor y = at::linear(h, w2);                 // (N, 3)
    return (y.pow(2).sum() + at::linear(y, w2.t()).sum()) / 10.0;  // w2 twice
  }
};

// Four layers in a chain: backward produces their gradients last layer first, the order the
// reducer's buckets take them in (one parameter a bucket at bucket_bytes 16).
struct Chain : torch::nn::Module {
  std::vector<at::Tensor> w;
  explicit Chain(uint64_t seed) {
    at::manual_seed(static_cast<int64_t>(seed));
    const int64_t widths[] = {4, 6, 5, 7, 3};
    for (int i = 0; i < 4; ++i) w.push_back(register_parameter("w" + std::to_string(i), at::randn({widths[i + 1], widths[i]})));
  }
  at::Tensor loss(const at::Tensor& x) {
    at::Tensor h = x;
    for (const auto& m : w) h = at::tanh(at::linear(h, m));
    return h.pow(2).sum();
  }
};

at::Tensor input(int64_t rank, int64_t micro) {
  return at::arange(12, at::kFloat).reshape({3, 4}).mul(0.1 * static_cast<double>(rank + 1)).add(static_cast<double>(micro));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("lmkit-dist-check: the collectives and the gradient reducer across the ranks of a launched job\n"
                "Usage: torchrun --nproc-per-node N --no-python lmkit-dist-check (docs/distributed.md); it takes no options\n");
    return 0;
  }
  try {
    const dist::Launch launch = dist::read_launch();
    if (!launch.active) {
      std::fprintf(stderr, "error: run under torchrun (no RANK/WORLD_SIZE in the environment)\n");
      return 2;
    }
    set_threads(1);
    auto group = dist::Group::create(launch, c10::kCPU, {});
    const int64_t r = group->rank(), w = group->size();

    for (auto dtype : {at::kFloat, at::kDouble, at::kLong}) {
      at::Tensor t = at::full({1000}, r + 1, at::TensorOptions().dtype(dtype));
      group->all_reduce_sum(t);
      check(t.eq(w * (w + 1) / 2).all().item<bool>(), std::string("all-reduce sum ") + c10::toString(dtype), r);
    }
    {
      // 16 M floats (64 MB): several of Gloo's chunks; each element i sums to i * W(W+1)/2 % ...
      at::Tensor base = at::arange(int64_t{1} << 24, at::kFloat).remainder(97);
      at::Tensor t = base * static_cast<double>(r + 1);
      group->all_reduce_sum(t);
      check(t.equal(base * static_cast<double>(w * (w + 1) / 2)), "all-reduce sum of 16M floats", r);
    }
    {
      std::vector<dist::Work> works;
      std::vector<at::Tensor> ts;
      for (int i = 0; i < 8; ++i) ts.push_back(at::full({100 + i}, static_cast<double>(i * (r + 1)), at::kDouble));
      for (auto& t : ts) works.push_back(group->all_reduce_sum_async(t));
      for (auto& k : works) k.wait();
      bool ok = true;
      for (int i = 0; i < 8; ++i) ok = ok && ts[static_cast<size_t>(i)].eq(static_cast<double>(i * w * (w + 1) / 2)).all().item<bool>();
      check(ok, "8 asynchronous all-reduces in flight", r);
    }
    for (int64_t root : {int64_t{0}, w - 1}) {
      std::vector<at::Tensor> ts = {at::full({3, 4}, static_cast<double>(r * 10 + 1)), at::full({5}, r, at::kLong)};
      group->broadcast(ts, root);
      check(ts[0].eq(static_cast<double>(root * 10 + 1)).all().item<bool>() && ts[1].eq(root).all().item<bool>(),
            "broadcast from rank " + std::to_string(root), r);
    }
    group->barrier();
    check(true, "barrier", r);

    // The reducer: two micro-batches per step, buckets of 64 bytes (two), against the
    // gradients of every rank's data computed here alone.
    Toy model(1234), reference(1234);
    {
      dist::GradientReducer reducer(group, model.parameters(), 64);
      check(reducer.buckets() >= 2, "reducer made " + std::to_string(reducer.buckets()) + " buckets", r);
      for (int step = 0; step < 2; ++step) {
        model.zero_grad(true);
        for (int64_t micro = 0; micro < 2; ++micro) {
          reducer.before_backward(micro == 1);
          model.loss(input(r, micro + step)).backward();
        }
        // Each gradient went into its bucket as backward summed it, and is not held a second time.
        const bool once = !model.w1.grad().defined() && !model.b1.grad().defined() && !model.w2.grad().defined();
        check(once, "after backward the gradients are in the buckets alone (no .grad kept beside them)", r);
        const auto scalars = reducer.finish({static_cast<double>(r + 1), 0.5});
        reference.zero_grad(true);
        for (int64_t k = 0; k < w; ++k) {
          for (int64_t micro = 0; micro < 2; ++micro) reference.loss(input(k, micro + step)).backward();
        }
        bool same = true;
        double worst = 0;
        for (const char* name : {"w1", "b1", "w2"}) {
          const at::Tensor g = model.named_parameters()[name].grad(), e = reference.named_parameters()[name].grad();
          same = same && g.defined();
          if (g.defined()) worst = std::max(worst, (g - e).abs().max().item<double>());
        }
        check(same && worst < 1e-5, "reduced gradients equal the whole batch's (max diff " + std::to_string(worst) + ")", r);
        check(!model.unused.grad().defined(), "a parameter no rank used keeps no gradient", r);
        check(scalars.size() == 2 && scalars[0] == static_cast<double>(w * (w + 1) / 2) && scalars[1] == 0.5 * w,
              "scalars summed with the gradients", r);
      }
    }
    group->barrier();

    // ZeRO stages 1 and 2: each rank's chunk of every bucket is the sum over ranks, and stage 2
    // holds at most two whole buckets at once (the one reducing, the one filling), stage 1 all.
    // Stage 2 with two micro-batches a step: each reduce-scattered as it ends and added to the
    // chunks, no whole gradient held between them.
    for (const auto& [shard, micros] : {std::pair<int, int>{1, 1}, {2, 1}, {2, 2}}) {
      Chain chain(99), whole(99);
      dist::GradientReducer reducer(group, chain.parameters(), 16, shard);
      const std::string stage = "stage " + std::to_string(shard) + (micros > 1 ? ", 2 micro-batches" : "") + ": ";
      check(reducer.buckets() == 4, stage + "one bucket a parameter", r);
      for (int step = 0; step < 2; ++step) {
        chain.zero_grad(true);
        for (int m = 0; m < micros; ++m) {
          reducer.before_backward(m + 1 == micros);
          chain.loss(input(r, 2 * step + m)).backward();
          if (m + 1 == micros) break;
          reducer.end_micro_batch();
          const bool none = std::none_of(chain.w.begin(), chain.w.end(), [](const at::Tensor& p) { return p.grad().defined(); });
          check(none, stage + "no whole gradient kept between micro-batches", r);
        }
        reducer.finish({});
        whole.zero_grad(true);
        for (int64_t k = 0; k < w; ++k) {
          for (int m = 0; m < micros; ++m) whole.loss(input(k, 2 * step + m)).backward();
        }
        double worst = 0;
        int64_t largest_pair = 0;
        std::vector<int64_t> bytes;
        const auto places = reducer.places();
        for (size_t i = 0; i < places.size(); ++i) {
          const auto& place = places[i];
          const int64_t chunk = reducer.chunk(place.bucket);
          at::Tensor flat = at::zeros({chunk * w});  // the bucket as every rank's sum lays it out
          const auto j = std::find_if(chain.w.begin(), chain.w.end(), [&](const at::Tensor& m) { return m.is_same(place.param); });
          const at::Tensor& sum = whole.w[static_cast<size_t>(j - chain.w.begin())].grad();
          flat.narrow(0, place.offset, place.param.numel()).copy_(sum.view({-1}));
          worst = std::max(worst, (reducer.shard_gradient(place.bucket) - flat.narrow(0, r * chunk, chunk)).abs().max().item<double>());
          bytes.push_back(chunk * w * 4);
          if (i > 0) largest_pair = std::max(largest_pair, bytes[i] + bytes[i - 1]);
        }
        check(worst < 1e-5, stage + "each rank's chunk is the sum over ranks (max diff " + std::to_string(worst) + ")", r);
        const int64_t peak = reducer.peak_bucket_bytes(), all = reducer.bucket_bytes();
        const std::string held = " (" + std::to_string(peak) + " of " + std::to_string(all) + " bytes)";
        if (shard == 1) check(peak == all, stage + "every bucket's buffer held" + held, r);
        if (shard == 2) check(peak <= largest_pair && peak < all, stage + "at most two buckets' buffers held at once" + held, r);
      }
    }
    group->barrier();
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
