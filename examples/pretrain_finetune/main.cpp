// lmkit as a library, top to bottom: a BERT from a preset is pretrained a few steps
// with masked LM, then finetuned as a sentence classifier, and both results printed.
//   pretrain_finetune PRESET TEXT TRAIN.tsv DEV.tsv OUTPUT
#include <cstdio>
#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/runtime.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/tasks.h"
#include "lmkit/eval/classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/trainer.h"
#include "lmkit/version.h"

using namespace lmkit;

int main(int argc, char** argv) {
  if (argc != 6) return std::fprintf(stderr, "usage: %s PRESET TEXT TRAIN.tsv DEV.tsv OUTPUT\n", argv[0]), 2;
  const std::string preset = argv[1], text = argv[2], train_tsv = argv[3], dev_tsv = argv[4], out = argv[5];
  try {
    std::printf("lmkit %s on LibTorch %s\n", version().c_str(), torch_version().c_str());
    const c10::Device device = init_runtime(RuntimeOptions{});  // CPU, every core, seed 42
    std::filesystem::create_directories(out);

    // A SentencePiece tokenizer with BERT's special tokens, trained on the text.
    tokenizer::TrainOptions t;
    t.inputs = {text}, t.vocab_size = 2000, t.family = "bert", t.output = out + "/tokenizer.model";
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::train(t);

    // BERT from the preset, its vocabulary fitted to the tokenizer, with the masked-LM head.
    const models::Family& bert = models::family("bert");
    Json config = load_json_file(preset);
    bert.adopt_vocabulary(config, tok.vocab_size(), tok.specials().pad, tok.specials().eos);
    auto model = models::create_model(config, preset, bert.objective("mlm").architecture);

    // Masked-LM examples of 64 tokens from the text, and the library's trainer: 30 steps.
    data::ObjectiveInputs in;
    in.corpus = data::open_corpus(text, tok, out + "/cache", "text"), in.tokenizer = &tok, in.seq_len = 64;
    auto mlm = data::objective("mlm").make_dataset(in);
    data::LoaderOptions loader;
    loader.batch_size = 16, loader.pad_id = data::pad_id(tok);
    train::TrainerOptions pre;
    pre.steps = 30, pre.schedule.lr = 1e-3, pre.schedule.warmup = 3, pre.output = out + "/pretrain";
    auto lock = train::open_run_directory(pre.output, /*resume=*/false, /*overwrite=*/true);  // held while it trains
    train::TrainerInputs pre_in;
    pre_in.model = model, pre_in.train = mlm, pre_in.loader = loader, pre_in.device = device;
    pre_in.save_extra = [&](const std::string& dir) { tok.save(dir); };  // the tokenizer in each checkpoint
    const Json pretrained = train::Trainer(pre_in, pre).run();
    std::printf("pretrained: train loss %.3f\n", pretrained["train_loss"].get<double>());

    // The pretrained encoder under a new two-class head, finetuned 40 steps on TRAIN.tsv.
    auto classifier = models::load_pretrained(pre.output + "/final", bert.head_or_error(models::kClassificationHead), nullptr,
                                              {{"num_labels", 2}}, /*new_head=*/true);
    const data::ColumnSpec columns;  // "sentence" and "label" columns, as SST-2's
    const auto labels = data::make_label_map(data::read_labelled_rows(train_tsv, columns));
    auto train_set = std::make_shared<data::ClassificationDataset>(train_tsv, columns, tok, 64, labels);
    auto dev_set = std::make_shared<data::ClassificationDataset>(dev_tsv, columns, tok, 64, labels);
    train::TrainerOptions fine;
    fine.steps = 40, fine.schedule.lr = 1e-3, fine.schedule.warmup = 4, fine.output = out + "/finetune";
    fine.evaluator = [&](models::Model& m) { return eval::evaluate_classifier(m, dev_set, 32, loader.pad_id, device); };
    fine.best_metric = "accuracy", fine.higher_is_better = true;
    auto lock2 = train::open_run_directory(fine.output, false, true);
    train::TrainerInputs fine_in;
    fine_in.model = classifier, fine_in.train = train_set, fine_in.loader = loader, fine_in.device = device;
    train::Trainer(fine_in, fine).run();

    const Json dev = eval::evaluate_classifier(*classifier, dev_set, 32, loader.pad_id, device);
    std::printf("finetuned: dev accuracy %.3f, macro F1 %.3f over %lld examples\n", dev["accuracy"].get<double>(),
                dev["macro_f1"].get<double>(), static_cast<long long>(dev["examples"].get<int64_t>()));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return static_cast<int>(e.code());
  }
}
