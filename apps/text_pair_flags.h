// The flags that name a text-to-text set and lay it out, shared by lmkit-finetune
// (--task seq2seq) and lmkit-evaluate (--metric generation).
#pragma once

#include <string>

#include "lmkit/core/app.h"
#include "lmkit/data/tasks.h"

namespace lmkit {

/// `what` starts each help text ("seq2seq", "generation"); `data_flag` is the flag
/// that names the set (--train, --data); `defaults` ends each help text.
inline void add_text_pair_flags(CLI::App& app, data::PairSpec& pairs, data::Seq2SeqOptions& s2s, const std::string& what,
                                const std::string& data_flag, const std::string& defaults) {
  app.add_option("--source-column", pairs.source, what + ": source column, header name or 0-based index, or JSONL field" + defaults);
  app.add_option("--target-column", pairs.target, what + ": target column, header name or 0-based index, or JSONL field" + defaults);
  app.add_option("--source-lang", pairs.source_lang, what + ": parallel files, " + data_flag + " PREFIX reads PREFIX.SRC" + defaults);
  app.add_option("--target-lang", pairs.target_lang, what + ": parallel files, " + data_flag + " PREFIX reads PREFIX.TGT" + defaults);
  app.add_option("--source-prefix", s2s.source_prefix,
                 what + ": text before every source (T5's 'translate German to English: ')" + defaults);
  app.add_option("--separator", s2s.separator, what + ", GPT-2: text between the source and the target" + defaults);
  app.add_option("--max-target-length", s2s.max_target_length, what + ": target tokens, EOS included" + defaults)
      ->check(in_range(2, 1 << 16));
}

}  // namespace lmkit
