#include "lmkit/data/pipeline.h"

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/names.h"
#include "lmkit/data/tasks.h"

namespace lmkit::data {

namespace {

// Inputs of B rows of T ids, no padding (as the loader collates full rows).
Batch random_inputs(int64_t b, int64_t t, int64_t vocab) {
  Batch batch;
  batch.input_ids = at::randint(5, vocab, {b, t}, at::kLong);
  return batch;
}

// 15% of positions carry a label, as the masked-LM objectives make them.
at::Tensor random_mlm_labels(int64_t b, int64_t t, int64_t vocab) {
  auto chosen = at::rand({b, t}).lt(0.15);
  return at::where(chosen, at::randint(5, vocab, {b, t}, at::kLong), at::full({b, t}, -100, at::kLong));
}

// 15% of positions labelled in spans of 3 with unlabelled tokens between them, as span masking leaves them.
at::Tensor random_span_labels(int64_t b, int64_t t, int64_t vocab) {
  const at::Tensor pos = at::arange(t, at::kLong).unsqueeze(0) + at::randint(0, 20, {b, 1}, at::kLong);  // (B, T)
  const at::Tensor inner = at::arange(t, at::kLong).gt(0).logical_and(at::arange(t, at::kLong).lt(t - 1));
  const at::Tensor chosen = pos.remainder(20).lt(3).logical_and(inner);
  return at::where(chosen, at::randint(5, vocab, {b, t}, at::kLong), at::full({b, t}, -100, at::kLong));
}

Batch synthetic_targets(int64_t b, int64_t t, int64_t target_len, int64_t vocab) {
  Batch batch = random_inputs(b, t, vocab);
  batch.labels = at::randint(5, vocab, {b, target_len}, at::kLong);
  return batch;
}

const tokenizer::Tokenizer& tokenizer_of(const ObjectiveInputs& in) {
  if (!in.tokenizer) throw RuntimeError("objective inputs without a tokenizer");
  return *in.tokenizer;
}

ObjectiveSpec spec(const std::string& name, const std::string& summary) {
  ObjectiveSpec o;
  o.name = name;
  o.summary = summary;
  return o;
}

// Masked LM on packed blocks (Liu et al. 2019); with `spans`, SpanBERT's span masking, whose
// spans the span boundary objective reads from the labels.
ObjectiveSpec masked_objective(const std::string& name, const std::string& summary, bool spans) {
  ObjectiveSpec o = spec(name, summary);
  o.needs = {"mask"};
  o.packs_documents = true;
  o.make_dataset = [spans](const ObjectiveInputs& in) -> std::shared_ptr<Dataset> {
    MaskingOptions masking = in.masking;
    if (spans) masking.spans = true;
    return std::make_shared<MaskedLmDataset>(in.corpus, tokenizer_of(in), in.seq_len, masking, in.seed, in.packing);
  };
  o.synthetic_batch = [spans](int64_t b, int64_t t, int64_t, int64_t vocab) {
    Batch batch = random_inputs(b, t, vocab);
    batch.labels = spans ? random_span_labels(b, t, vocab) : random_mlm_labels(b, t, vocab);
    return batch;
  };
  return o;
}

ObjectiveSpec nsp_objective() {
  ObjectiveSpec nsp = spec("mlm+nsp", "masked LM + next-sentence prediction on sentence pairs (Devlin et al. 2019)");
  nsp.needs = {"mask", "cls", "sep"};
  nsp.make_dataset = [](const ObjectiveInputs& in) -> std::shared_ptr<Dataset> {
    return std::make_shared<NextSentenceDataset>(in.corpus, tokenizer_of(in), in.seq_len, in.masking, in.seed);
  };
  nsp.synthetic_batch = [](int64_t b, int64_t t, int64_t, int64_t vocab) {
    Batch batch = random_inputs(b, t, vocab);
    batch.labels = random_mlm_labels(b, t, vocab);
    batch.token_type_ids = at::cat({at::zeros({b, t / 2}, at::kLong), at::ones({b, t - t / 2}, at::kLong)}, 1);
    batch.extra[kNextSentenceLabel] = at::randint(0, 2, {b}, at::kLong);
    return batch;
  };
  return nsp;
}

ObjectiveSpec span_objective() {
  ObjectiveSpec span = spec("span", "span corruption: sentinels in the input, the spans as the target (Raffel et al. 2020)");
  span.needs = {"eos", "sentinels"};
  span.separate_targets = true;
  span.make_dataset = [](const ObjectiveInputs& in) -> std::shared_ptr<Dataset> {
    return std::make_shared<SpanCorruptionDataset>(in.corpus, tokenizer_of(in), in.seq_len, in.seed);
  };
  span.target_length = [](int64_t seq_len) { return span_corruption_lengths(seq_len, 0.15, 3.0).second; };
  span.synthetic_batch = synthetic_targets;
  return span;
}

ObjectiveSpec clm_objective() {
  ObjectiveSpec clm = spec("clm", "causal LM on packed blocks (Radford et al. 2018)");
  clm.needs = {"eos"};
  clm.packs_documents = true;
  clm.make_dataset = [](const ObjectiveInputs& in) -> std::shared_ptr<Dataset> {
    return std::make_shared<CausalLmDataset>(in.corpus, tokenizer_of(in), in.seq_len, in.packing);
  };
  clm.synthetic_batch = [](int64_t b, int64_t t, int64_t, int64_t vocab) {
    Batch batch = random_inputs(b, t, vocab);
    batch.labels = batch.input_ids;
    return batch;
  };
  return clm;
}

ObjectiveSpec seq2seq_objective() {
  ObjectiveSpec seq2seq = spec("seq2seq", "translation on line-aligned parallel text (Vaswani et al. 2017)");
  seq2seq.parallel_text = true;
  seq2seq.separate_targets = true;
  seq2seq.make_dataset = [](const ObjectiveInputs& in) -> std::shared_ptr<Dataset> {
    return std::make_shared<Seq2SeqDataset>(in.source_file, in.target_file, tokenizer_of(in), in.seq_len, in.seq_len);
  };
  seq2seq.target_length = [](int64_t seq_len) { return seq_len; };
  seq2seq.synthetic_batch = synthetic_targets;
  return seq2seq;
}

// MAE (He et al. 2022): images, each with per-patch noise from its seed (the patches of the smallest
// values are kept): the model masks and reconstructs, the data only draws.
ObjectiveSpec mae_objective() {
  ObjectiveSpec mae = spec("mae", "masked autoencoding of image patches (He et al. 2022): IDX images, 75% of patches dropped");
  mae.images = true;
  mae.make_dataset = [](const ObjectiveInputs& in) -> std::shared_ptr<Dataset> {
    check_input(in.images != nullptr, "objective mae reads images (an IDX file), not text");
    return std::make_shared<ImageDataset>(in.images, in.processor, /*with_labels=*/false, in.seq_len, in.seed);
  };
  return mae;
}

}  // namespace

namespace {

std::vector<ObjectiveSpec>& registry() {
  static std::vector<ObjectiveSpec> all = [] {
    std::vector<ObjectiveSpec> builtin = {
        masked_objective("mlm", "masked LM on packed full-sentence blocks (no NSP; Liu et al. 2019)", false),
        nsp_objective(),
        masked_objective("mlm+sbo", "span masking + the span boundary objective on packed blocks (Joshi et al. 2020)", true),
        span_objective(),
        clm_objective(),
        seq2seq_objective(),
        mae_objective()};
    for (auto& o : builtin) o.source = "lmkit";
    return builtin;
  }();
  return all;
}

}  // namespace

const std::vector<ObjectiveSpec>& objectives() { return registry(); }

void register_objective(ObjectiveSpec spec) {
  check_input(!spec.name.empty() && spec.make_dataset != nullptr,
              registering_source() + ": an objective needs a name and make_dataset");
  for (const auto& o : registry()) {
    check_input(o.name != spec.name, "objective '" + spec.name + "' is registered twice: by " + o.source + " and by " +
                                         registering_source());
  }
  spec.source = registering_source();
  registry().push_back(std::move(spec));
}

namespace {

std::string packing_objective_names() {
  std::string names;
  for (const auto& o : objectives()) {
    if (o.packs_documents) names += (names.empty() ? "" : ", ") + o.name;
  }
  return names;
}

}  // namespace

void check_objective_packing(const ObjectiveSpec& spec, const PackingOptions& packing) {
  check_input(!packing.any() || spec.packs_documents,
              "--document-mask and --reset-positions apply to objectives that pack documents into blocks (" +
                  packing_objective_names() + "), not " + spec.name);
}

std::shared_ptr<Dataset> ObjectiveSpec::dataset(const ObjectiveInputs& inputs) const {
  check_objective_packing(*this, inputs.packing);
  auto ds = call_registered(source, "objective '" + name + "': make_dataset", [&] { return make_dataset(inputs); });
  if (!ds) throw RuntimeError(source + ": objective '" + name + "': make_dataset returned no dataset");
  return ds;
}

Batch ObjectiveSpec::synthetic(int64_t batch, int64_t seq_len, int64_t target_len, int64_t vocab) const {
  check_input(synthetic_batch != nullptr, source + ": objective '" + name + "' has no synthetic_batch, so lmkit-bench " +
                                              "cannot make its batches (the plugin's ObjectiveSpec::synthetic_batch)");
  return call_registered(source, "objective '" + name + "': synthetic_batch",
                         [&] { return synthetic_batch(batch, seq_len, target_len, vocab); });
}

std::string objective_names(bool corpus_only) {
  std::vector<std::string> names;
  for (const auto& o : objectives()) {
    if (!corpus_only || (!o.parallel_text && !o.images)) names.push_back(o.name);
  }
  return join_names(names, " or ");
}

const ObjectiveSpec& objective(const std::string& name) {
  for (const auto& o : objectives()) {
    if (o.name == name) return o;
  }
  throw InputError("unknown objective '" + name + "' (expected " + objective_names() + ")");
}

void check_objective_tokenizer(const ObjectiveSpec& spec, const tokenizer::Tokenizer& tok) {
  const auto& s = tok.specials();
  for (const auto& need : spec.needs) {
    const bool has = need == "mask" ? s.mask >= 0 : need == "cls" ? s.cls >= 0 : need == "sep" ? s.sep >= 0
                   : need == "eos" ? (s.eos >= 0 || s.sep >= 0) : need == "sentinels" ? s.num_sentinels > 0 : true;
    if (!has) {
      throw InputError("objective " + spec.name + " needs a tokenizer with " + need + " token(s); " + tok.source() +
                       " (" + tok.family() + ") has none");
    }
  }
}

int32_t pad_id(const tokenizer::Tokenizer& tok) {
  return tok.specials().pad >= 0 ? tok.specials().pad : tok.specials().eos;
}

}  // namespace lmkit::data
