// Fuzzes the SQuAD reader (extractive question answering's data) and the official scores
// over what it read: any file is SQuAD's JSON or one InputError, and scoring each question
// with its own first gold answer (or "" for none) gives figures in [0, 100].
#include <map>

#include "fuzz_util.h"
#include "lmkit/data/squad.h"
#include "lmkit/eval/squad.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = lmkit::fuzz::scratch() / "squad.json";
  lmkit::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  lmkit::fuzz::expect_input_errors([&] {
    const lmkit::data::SquadSet set = lmkit::data::read_squad(path.string());
    std::map<std::string, std::string> answers;
    for (const auto& q : set.questions) {
      if (q.context < 0 || static_cast<size_t>(q.context) >= set.contexts.size()) __builtin_trap();
      for (const auto& a : q.answers) {
        if (set.contexts[static_cast<size_t>(q.context)].compare(static_cast<size_t>(a.start), a.text.size(), a.text) != 0) {
          __builtin_trap();  // the reader promised the answer sits at its offset
        }
      }
      answers[q.id] = q.answers.empty() ? "" : q.answers[0].text;
    }
    for (const bool v2 : {false, true}) {
      const lmkit::Json r = lmkit::eval::squad_scores(set, answers, v2);
      const double f1 = r["f1"].get<double>();
      if (!(f1 >= 0 && f1 <= 100)) __builtin_trap();
    }
  });
  return 0;
}
