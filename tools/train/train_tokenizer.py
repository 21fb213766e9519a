"""The demo model's tokenizer: a 2,048-entry byte-level BPE trained on the demo corpus with HF `tokenizers`, laid
out like DeepSeek-V4's tokenizer.json (same normalizer, pre-tokenizer, decoder and post-processor; the V4 special
tokens with V4's flags at ids 0..50). See docs/demo-model.md for why not the real 129,280-entry V4 vocabulary.

    python3 tools/train/train_tokenizer.py DATA_DIR OUT_DIR [--vocab 2048] [--golden FILE]

DATA_DIR is prepare_data.py's output (train.jsonl + dialogues.jsonl are the training text). Writes OUT_DIR/
tokenizer.json and tokenizer_config.json (chat template); --golden writes {"text", "ids"} lines encoded by HF
`tokenizers` (add_special_tokens=False) for the engine's tokenizer test. Deterministic for the same data.
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer, trainers
from tokenizers import pre_tokenizers

# DeepSeek-V3/V4 tokenizer.json sections, verbatim (the V4 file is V3's with more added tokens;
# tools/make_v4_tokenizer.js).
V4_SECTIONS = json.loads(r'''{
 "normalizer": {"type": "Sequence", "normalizers": []},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
  {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": false},
  {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
 "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
 "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
}''')

# The V4 added tokens kept here, in id order, with V4's flags (special, normalized): V4 ids 0-2, 128800-128846 and
# the DSpark noise token 128799 (<｜place▁holder▁no▁799｜>), renumbered 0..50.
SPECIAL_TRUE = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
NAMED = ["<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", "<｜User｜>", "<｜Assistant｜>", "<|EOT|>",
         "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
         "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>",
         "<｜tool▁sep｜>", "<｜begin▁of▁repo▁name｜>", "<｜end▁of▁repo▁name｜>", "<｜begin▁of▁file▁name｜>",
         "<｜end▁of▁file▁name｜>", "<｜begin▁of▁file｜>", "<｜end▁of▁file｜>", "<think>", "</think>",
         "<｜place▁holder▁for▁copy｜>", "<｜place▁holder▁for▁pointer▁replace｜>", "｜DSML｜", "<｜begin▁sys｜>",
         "<｜end▁sys｜>", "<｜latest_reminder｜>", "<｜action｜>", "<｜query｜>", "<｜authority｜>", "<｜domain｜>",
         "<｜task｜>", "<｜political｜>", "<｜entity｜>", "<｜title｜>", "<｜safety｜>", "<｜answer｜>", "<｜search｜>",
         "<dsml:", "</dsml:", "<｜search▁begin｜>", "<｜search▁end｜>", "<｜extracted_url｜>", "<｜read_url｜>",
         "<｜end_of_query｜>"]
NOISE = "<｜place▁holder▁no▁799｜>"
ADDED = ([(t, True, False) for t in SPECIAL_TRUE] + [(t, t == "<|EOT|>", True) for t in NAMED] + [(NOISE, True, False)])
NOISE_ID = len(ADDED) - 1

# HF chat template for the chat mode of DeepSeek-V4's encoding (what `dsv4 serve` renders for system / user /
# assistant messages; thinking, tools and the other roles are the engine's, src/tokenizer/chat_encoding.cpp).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}"
    "{% elif m['role'] == 'user' %}<｜User｜>{{ m['content'] }}<｜Assistant｜></think>"
    "{% elif m['role'] == 'assistant' %}{{ m['content'] }}<｜end▁of▁sentence｜>{% endif %}{% endfor %}")


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def skeleton():
    """An untrained BPE with V4's pipeline, as tokenizer.json text."""
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           **{k: V4_SECTIONS[k] for k in ("normalizer", "pre_tokenizer", "post_processor", "decoder")},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": {},
                     "merges": []}}
    return json.dumps(doc, ensure_ascii=False)


def set_added_flags(tok_json):
    """The trainer registers the special tokens as special=True; give each V4's own flags."""
    doc = json.loads(tok_json)
    flags = {content: (special, normalized) for content, special, normalized in ADDED}
    for entry in doc["added_tokens"]:
        entry["special"], entry["normalized"] = flags[entry["content"]]
    return json.dumps(doc, ensure_ascii=False, indent=1)


def train(data_dir, vocab_size):
    texts = read_jsonl(os.path.join(data_dir, "train.jsonl")) + read_jsonl(os.path.join(data_dir, "dialogues.jsonl"))
    tok = Tokenizer.from_str(skeleton())
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=[content for content, _, _ in ADDED],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok = Tokenizer.from_str(set_added_flags(tok.to_str()))
    for i, (content, _, _) in enumerate(ADDED):
        assert tok.token_to_id(content) == i, (content, tok.token_to_id(content))
    assert tok.get_vocab_size() <= vocab_size, tok.get_vocab_size()
    return tok


def golden_texts(data_dir):
    """Strings the engine's tokenizer must encode exactly like HF: held-out paragraphs, chats, edge cases."""
    texts = []
    for doc in read_jsonl(os.path.join(data_dir, "test.jsonl"))[:8]:
        texts += [p for p in doc.split("\n\n")[:12]]
    texts += read_jsonl(os.path.join(data_dir, "dialogues.jsonl"))[:40]
    texts += ["", " ", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n", "1234567 89.5% $3,000", "don't I'll we're",
              "café naïve Ünïcödé — “quotes” …", "中文字符和かなカナ", "emoji 🙂👍🏽 mixed", "<｜User｜>hi<｜Assistant｜></think>ok",
              "<｜begin▁of▁sentence｜>text<｜end▁of▁sentence｜>", "a<think>b</think>c｜DSML｜d", NOISE * 3,
              "<｜User｜ not special", "CamelCase snake_case kebab-case URL https://example.org/a?b=c",
              "     many spaces", "\n\n\n", "x" * 300]
    return texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--golden", default="")
    args = ap.parse_args()
    tok = train(args.data_dir, args.vocab)
    os.makedirs(args.out_dir, exist_ok=True)
    open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8").write(tok.to_str(pretty=True) + "\n")
    config = {"bos_token": SPECIAL_TRUE[0], "eos_token": SPECIAL_TRUE[1], "pad_token": SPECIAL_TRUE[2],
              "add_bos_token": False, "add_eos_token": False, "model_max_length": 4096,
              "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE}
    json.dump(config, open(os.path.join(args.out_dir, "tokenizer_config.json"), "w", encoding="utf-8"),
              ensure_ascii=False, indent=1)
    if args.golden:
        with open(args.golden, "w", encoding="utf-8") as f:
            for text in golden_texts(args.data_dir):
                ids = tok.encode(text, add_special_tokens=False).ids
                f.write(json.dumps({"text": text, "ids": ids}, ensure_ascii=False) + "\n")
    sample = read_jsonl(os.path.join(args.data_dir, "valid.jsonl"))
    chars = sum(len(t) for t in sample)
    tokens = sum(len(e.ids) for e in tok.encode_batch(sample, add_special_tokens=False))
    print(f"tokenizer: vocab {tok.get_vocab_size()}, validation text {chars / tokens:.3f} chars/token", flush=True)


if __name__ == "__main__":
    sys.exit(main())
