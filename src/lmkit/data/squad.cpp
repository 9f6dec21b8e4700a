#include "lmkit/data/squad.h"

#include <algorithm>
#include <istream>
#include <iterator>
#include <map>
#include <set>

#include "lmkit/core/batch.h"
#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/parquet.h"
#include "lmkit/data/rows.h"
#include "lmkit/data/text_input.h"
#include "lmkit/data/token_tasks.h"

namespace lmkit::data {

namespace {

// BERT's run_squad whitespace: space, tab, CR, LF and U+202F (narrow no-break space).
size_t space_at(const std::string& s, size_t i) {
  const char c = s[i];
  if (c == ' ' || c == '\t' || c == '\r' || c == '\n') return 1;
  if (s.compare(i, 3, "\xE2\x80\xAF") == 0) return 3;
  return 0;
}

ContextWords split_words(const std::string& context) {
  ContextWords w;
  bool in_word = false;
  for (size_t i = 0; i < context.size();) {
    const size_t space = space_at(context, i);
    if (space) {
      if (in_word) w.end.push_back(static_cast<int64_t>(i));
      in_word = false;
      i += space;
      continue;
    }
    if (!in_word) w.begin.push_back(static_cast<int64_t>(i));
    in_word = true;
    ++i;
  }
  if (in_word) w.end.push_back(static_cast<int64_t>(context.size()));
  return w;
}

// Byte offset of each code point of a UTF-8 string, and one past the end.
std::vector<int64_t> code_point_offsets(const std::string& s) {
  std::vector<int64_t> at;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) at.push_back(static_cast<int64_t>(i));
  }
  at.push_back(static_cast<int64_t>(s.size()));
  return at;
}

const Json& field(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  check_input(it != j.end(), where + ": no \"" + key + "\"");
  return *it;
}

std::string text_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  check_input(v.is_string(), where + ": \"" + key + "\" is not a string");
  return v.get<std::string>();
}

const Json& array_field(const Json& j, const char* key, const std::string& where) {
  const Json& v = field(j, key, where);
  check_input(v.is_array(), where + ": \"" + key + "\" is not a list");
  return v;
}

// The word holding byte `at`, or the first word after it (an answer that starts on a space).
int64_t word_at(const ContextWords& w, int64_t at) {
  const auto it = std::upper_bound(w.end.begin(), w.end.end(), at);
  return static_cast<int64_t>(it - w.end.begin());
}

// One entry of a paragraph's "qas" (`at` names it until its id is known).
SquadQuestion read_question(const Json& qa, const std::string& at, const std::string& path, const std::string& context,
                            std::set<std::string>& ids) {
  check_input(qa.is_object(), at + " is not an object");
  SquadQuestion q;
  const Json& id = field(qa, "id", at);
  check_input(id.is_string() || id.is_number_integer(), at + ": \"id\" is not a string");
  q.id = id.is_string() ? id.get<std::string>() : id.dump();
  const std::string named = path + ": question '" + q.id + "'";
  check_input(ids.insert(q.id).second, named + " appears twice");
  q.question = text_field(qa, "question", at);
  if (qa.contains("is_impossible")) {
    check_input(qa["is_impossible"].is_boolean(), named + ": \"is_impossible\" is not true or false");
    q.impossible = qa["is_impossible"].get<bool>();
  }
  if (q.impossible) return q;  // v2.0's plausible answers are not read
  const auto chars = code_point_offsets(context);
  for (const auto& ans : array_field(qa, "answers", named)) {
    check_input(ans.is_object(), named + ": an answer is not an object");
    SquadAnswer x;
    x.text = text_field(ans, "text", named);
    const Json& start = field(ans, "answer_start", named);
    check_input(start.is_number_integer() && start.get<int64_t>() >= 0 &&
                    start.get<int64_t>() < static_cast<int64_t>(chars.size()) - 1,
                named + ": answer_start " + start.dump() + " is not a character of its context");
    x.start = chars[start.get<size_t>()];
    check_input(!x.text.empty() && context.compare(static_cast<size_t>(x.start), x.text.size(), x.text) == 0,
                named + ": answer '" + x.text + "' is not at character " + start.dump() + " of its context");
    q.answers.push_back(std::move(x));
  }
  check_input(!q.answers.empty(), named + ": no answers, and it is not is_impossible");
  return q;
}

// HF datasets' squad and squad_v2 as rows (the Hub's Parquet, to_json's JSONL): id, context,
// question, answers {text: [...], answer_start: [...]}, no answer for an unanswerable question.
// Each row becomes the SQuAD JSON entry it stands for; rows of one context share it.
SquadSet read_squad_rows(const std::string& path) {
  SquadSet set;
  set.path = path;
  std::set<std::string> ids;
  std::map<std::string, int64_t> seen;  // context -> its index
  for_each_json_row(path, {"id", "context", "question", "answers"}, [&](const Json& row, const RowPlace& place) {
    check_input(row.is_object(), place.where + " is not an object");
    const std::string context = text_field(row, "context", place.where);
    const Json& answers = field(row, "answers", place.where);
    check_input(answers.is_object(), place.where + ": \"answers\" is not {\"text\": [...], \"answer_start\": [...]} (HF's squad)");
    const Json& texts = array_field(answers, "text", place.where + ": answers");
    const Json& starts = array_field(answers, "answer_start", place.where + ": answers");
    check_input(texts.size() == starts.size(), place.where + ": " + std::to_string(texts.size()) + " answer texts but " +
                                                   std::to_string(starts.size()) + " answer_start");
    Json qa = {{"id", field(row, "id", place.where)}, {"question", field(row, "question", place.where)},
               {"answers", Json::array()}, {"is_impossible", texts.empty()}};
    for (size_t k = 0; k < texts.size(); ++k) qa["answers"].push_back({{"text", texts[k]}, {"answer_start", starts[k]}});
    const auto [it, fresh] = seen.emplace(context, static_cast<int64_t>(set.contexts.size()));
    if (fresh) {
      set.words.push_back(split_words(context));
      set.contexts.push_back(context);
    }
    SquadQuestion q = read_question(qa, place.where, path, context, ids);
    q.context = it->second;
    set.with_negative = set.with_negative || q.impossible;
    set.questions.push_back(std::move(q));
  });
  check_input(!set.questions.empty(), path + ": no questions");
  return set;
}

}  // namespace

SquadSet read_squad(const std::string& path) {
  if (is_parquet_file(path)) return read_squad_rows(path);
  SquadSet set;
  set.path = path;
  Json j;
  {
    TextInput in(path);
    const std::string bytes((std::istreambuf_iterator<char>(in.stream())), std::istreambuf_iterator<char>());
    try {
      j = Json::parse(bytes);  // SQuAD's own file: one object with "data", on one line or many
    } catch (const Json::parse_error& e) {
      // A question a line (HF datasets' to_json writes JSON lines, whatever the name: dev.json).
      const Json first = Json::parse(bytes.substr(0, bytes.find('\n')), nullptr, /*allow_exceptions=*/false);
      if (first.is_object() && first.contains("question")) return read_squad_rows(path);
      throw InputError(path + ": not SQuAD's JSON (" + std::string(e.what()) + ")");
    }
  }
  if (j.is_object() && j.contains("question")) return read_squad_rows(path);  // JSON lines of one question
  check_input(j.is_object(), path + ": not SQuAD's JSON (an object with \"data\")");
  std::set<std::string> ids;
  const Json& data = array_field(j, "data", path);
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string article = path + ": data[" + std::to_string(a) + "]";
    check_input(data[a].is_object(), article + " is not an object");
    const Json& paragraphs = array_field(data[a], "paragraphs", article);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string where = article + ".paragraphs[" + std::to_string(p) + "]";
      check_input(paragraphs[p].is_object(), where + " is not an object");
      const std::string context = text_field(paragraphs[p], "context", where);
      const int64_t index = static_cast<int64_t>(set.contexts.size());
      const Json& qas = array_field(paragraphs[p], "qas", where);
      for (size_t k = 0; k < qas.size(); ++k) {
        SquadQuestion q = read_question(qas[k], where + ".qas[" + std::to_string(k) + "]", path, context, ids);
        q.context = index;
        set.with_negative = set.with_negative || q.impossible;
        set.questions.push_back(std::move(q));
      }
      set.words.push_back(split_words(context));
      set.contexts.push_back(context);
    }
  }
  check_input(!set.questions.empty(), path + ": no questions");
  return set;
}

namespace {

// A context's subwords, each word's own in order (token_tasks' encode_word): the word of each
// token, and each word's first and last token.
struct ContextTokens {
  std::vector<int32_t> ids, word;
  std::vector<int64_t> first, last;
};

ContextTokens tokenize_context(const tokenizer::Tokenizer& tok, const std::string& context, const ContextWords& w) {
  ContextTokens t;
  for (size_t k = 0; k < w.begin.size(); ++k) {
    t.first.push_back(static_cast<int64_t>(t.ids.size()));
    const auto pieces = encode_word(tok, context.substr(static_cast<size_t>(w.begin[k]), static_cast<size_t>(w.end[k] - w.begin[k])));
    t.ids.insert(t.ids.end(), pieces.begin(), pieces.end());
    t.word.insert(t.word.end(), pieces.size(), static_cast<int32_t>(k));
    t.last.push_back(static_cast<int64_t>(t.ids.size()) - 1);
  }
  return t;
}

// The question's tokens: HF's run_qa strips its left, then its first max_query_length.
std::vector<int32_t> encode_question(const tokenizer::Tokenizer& tok, const std::string& question, int64_t max_query_length) {
  const size_t lead = question.find_first_not_of(" \t\r\n");
  std::vector<int32_t> ids = tok.encode(lead == std::string::npos ? "" : std::string_view(question).substr(lead));
  if (static_cast<int64_t>(ids.size()) > max_query_length) ids.resize(static_cast<size_t>(max_query_length));
  return ids;
}

// The window of context tokens [begin, begin + length) after `question`, in the pair template;
// the answer's tokens [first, last] of the whole context mark it when the window holds them.
QaFeature make_window(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& question, const ContextTokens& c,
                      int64_t begin, int64_t length, int64_t first, int64_t last) {
  const std::vector<int32_t> span(c.ids.begin() + begin, c.ids.begin() + begin + length);
  // Which token is which: the template over -1 (the question) and -(word + 2) (the context).
  std::vector<int32_t> question_marks(question.size(), -1), word_marks;
  for (int64_t t = begin; t < begin + length; ++t) word_marks.push_back(-c.word[static_cast<size_t>(t)] - 2);
  const tokenizer::Encoding e = tok.apply_template(question, &span);
  const tokenizer::Encoding marks = tok.apply_template(question_marks, &word_marks);
  QaFeature f;
  f.input_ids = e.ids;
  f.type_ids = e.type_ids;
  int64_t context_at = -1;  // where the window's first token sits
  for (size_t t = 0; t < marks.ids.size(); ++t) {
    const int32_t m = marks.ids[t];
    f.word.push_back(m <= -2 ? -m - 2 : -1);
    if (m <= -2 && context_at < 0) context_at = static_cast<int64_t>(t);
  }
  if (first >= begin && last < begin + length && last >= first && context_at >= 0) {
    f.start = context_at + first - begin;
    f.end = context_at + last - begin;
  }
  return f;
}

}  // namespace

QuestionAnsweringDataset::QuestionAnsweringDataset(SquadSet set, const tokenizer::Tokenizer& tok, const QaOptions& o)
    : set_(std::move(set)), training_(o.training) {
  check_input(o.doc_stride >= 0, "--doc-stride " + std::to_string(o.doc_stride) + " is negative");
  const int64_t added = tok.post_processor().added(true);
  std::vector<ContextTokens> contexts;
  for (size_t c = 0; c < set_.contexts.size(); ++c) contexts.push_back(tokenize_context(tok, set_.contexts[c], set_.words[c]));
  for (size_t qi = 0; qi < set_.questions.size(); ++qi) {
    check_stop(kPreparingExamples);
    const SquadQuestion& q = set_.questions[qi];
    const ContextTokens& c = contexts[static_cast<size_t>(q.context)];
    const std::vector<int32_t> question = encode_question(tok, q.question, o.max_query_length);
    const std::string named = set_.path + ": question '" + q.id + "': ";
    const int64_t room = o.max_length - static_cast<int64_t>(question.size()) - added;
    check_input(room > 0, named + o.length_flag + " " + std::to_string(o.max_length) + " leaves no token of the context after its " +
                              std::to_string(question.size()) + " question tokens and " + std::to_string(added) + " special tokens");
    const int64_t n = static_cast<int64_t>(c.ids.size());
    check_input(n <= room || o.doc_stride < room,
                named + "--doc-stride " + std::to_string(o.doc_stride) + " must be below the " + std::to_string(room) +
                    " context tokens a window of " + o.length_flag + " " + std::to_string(o.max_length) + " holds beside this question");
    // The answer's tokens in the whole context (the first answer, as HF trains).
    int64_t first = -1, last = -1;
    const ContextWords& w = set_.words[static_cast<size_t>(q.context)];
    if (o.training && !q.answers.empty()) {
      const int64_t a = word_at(w, q.answers[0].start);
      const int64_t b = word_at(w, q.answers[0].start + static_cast<int64_t>(q.answers[0].text.size()) - 1);
      if (b < static_cast<int64_t>(w.begin.size())) {
        first = c.first[static_cast<size_t>(a)];
        last = c.last[static_cast<size_t>(b)];
      }
    }
    for (int64_t begin = 0;; begin += room - o.doc_stride) {  // windows that share doc_stride tokens
      const int64_t length = std::min(room, n - begin);
      features_.push_back(make_window(tok, question, c, begin, length, first, last));
      features_.back().question = static_cast<int64_t>(qi);
      if (begin + length >= n) break;
    }
  }
}

Example QuestionAnsweringDataset::get(int64_t index, int64_t) const {
  const QaFeature& f = features_[static_cast<size_t>(index)];
  Example e;
  e.input_ids = f.input_ids;
  e.token_type_ids = f.type_ids;
  if (training_) e.row_labels = {{kStartPositions, f.start}, {kEndPositions, f.end}};
  return e;
}

}  // namespace lmkit::data
