"""Ports of SQuAD's two official evaluation scripts, evaluate-v1.1.py and evaluate-v2.0.py
(the figures the SQuAD leaderboards report), for the parity tests of lmkit's SQuAD figures
(squad_cases.py) and of its text-to-text exact match and F1 (generation_metrics.py)."""
import collections
import re
import string


# evaluate-v1.1.py
def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def f1_score_v1(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def evaluate_v1(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article['paragraphs']:
            for qa in paragraph['qas']:
                total += 1
                if qa['id'] not in predictions:
                    continue
                ground_truths = list(map(lambda x: x['text'], qa['answers']))
                prediction = predictions[qa['id']]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score_v1, prediction, ground_truths)
    return {'exact_match': 100.0 * exact_match / total, 'f1': 100.0 * f1 / total}


# evaluate-v2.0.py (without na_prob: every question is predicted answerable or not by its text)
def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def evaluate_v2(dataset, preds):
    qid_to_has_ans = {}
    exact_scores, f1_scores = {}, {}
    for article in dataset:
        for p in article['paragraphs']:
            for qa in p['qas']:
                qid_to_has_ans[qa['id']] = bool(qa['answers'])
                qid = qa['id']
                gold_answers = [a['text'] for a in qa['answers'] if normalize_answer(a['text'])]
                if not gold_answers:
                    gold_answers = ['']
                a_pred = preds[qid]
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)

    def make_eval_dict(qid_list=None):
        if not qid_list:
            total = len(exact_scores)
            return collections.OrderedDict([('exact', 100.0 * sum(exact_scores.values()) / total),
                                            ('f1', 100.0 * sum(f1_scores.values()) / total), ('total', total)])
        total = len(qid_list)
        return collections.OrderedDict([('exact', 100.0 * sum(exact_scores[k] for k in qid_list) / total),
                                        ('f1', 100.0 * sum(f1_scores[k] for k in qid_list) / total), ('total', total)])

    out = make_eval_dict()
    has_ans = [k for k, v in qid_to_has_ans.items() if v]
    no_ans = [k for k, v in qid_to_has_ans.items() if not v]
    for prefix, ids in (('HasAns', has_ans), ('NoAns', no_ans)):
        if ids:
            for k, v in make_eval_dict(ids).items():
                out[f'{prefix}_{k}'] = v
    return out
