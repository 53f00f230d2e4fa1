"""The demo's short Python job (scripts/demo): a toy tokenizer over generated text shards.

It keeps a recognisable Python stack (main -> tokenize_shard -> count_words, and read_shard while
"waiting for storage"), so the daemon's Python stack sampler has something to show.
Usage: python3 demo-tokenize.py SECONDS
"""

import random
import sys
import time

WORDS = "the gpu sat idle while the input pipeline read the next shard from storage".split()


def read_shard(rng, n):
    time.sleep(0.2)  # storage latency
    return [rng.choice(WORDS) for _ in range(n)]


def count_words(words):
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return counts


def tokenize_shard(rng):
    words = read_shard(rng, 20000)
    counts = {}
    for _ in range(3):
        for w, c in count_words(words).items():
            counts[w] = counts.get(w, 0) + c
    return counts


def main(seconds):
    rng = random.Random(7)
    end = time.monotonic() + seconds
    shards = 0
    total = {}
    while time.monotonic() < end:
        for w, c in tokenize_shard(rng).items():
            total[w] = total.get(w, 0) + c
        shards += 1
        time.sleep(0.3)
    top = sorted(total.items(), key=lambda kv: -kv[1])[:3]
    print(f"tokenized {shards} shards; most frequent: {top}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30)
