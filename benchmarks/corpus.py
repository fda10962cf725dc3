"""A fixed corpus of English-like sentences of mixed length for the model
benchmark and tests: built from word lists with a seeded RNG (no download,
identical on every machine and NumPy version >= 1.17).

    from corpus import make_corpus
    sentences = make_corpus(1000)        # list of 1000 str, seed 0

Lengths: mostly short (a few to ~30 words, like search queries and
titles), a tail of paragraphs (up to ~220 words, some past the model's
256-token limit). `python benchmarks/corpus.py` prints statistics.
"""
import numpy as np

SUBJECTS = ("the cat", "a small dog", "my neighbour", "the committee", "our team", "the old man",
            "a young engineer", "the weather", "this recipe", "the train", "every student",
            "the new policy", "her brother", "the city council", "a local farmer", "the market",
            "the museum", "his grandmother", "the company", "the orchestra", "a stranger",
            "the doctor", "the river", "the software update", "the football club")
VERBS = ("likes", "visited", "rejected", "painted", "explained", "forgot", "delivered", "built",
         "celebrated", "ignored", "studied", "repaired", "announced", "cooked", "followed",
         "described", "measured", "sold", "carried", "discovered", "watched", "improved")
OBJECTS = ("the red car", "a quiet garden", "the long report", "fresh bread", "the mountain path",
           "a broken window", "the annual budget", "an old photograph", "the evening news",
           "a strange noise", "the final exam", "a cup of coffee", "the tall building",
           "the winter festival", "a secret plan", "the blue notebook", "a heavy suitcase",
           "the results of the survey", "the kitchen table", "a wooden bridge")
ADVERBS = ("quickly", "carefully", "yesterday", "again", "without a word", "in the morning",
           "after lunch", "despite the rain", "with great care", "for the first time",
           "near the station", "late at night", "before the meeting", "as expected")
CONNECTORS = ("and", "but", "because", "although", "while", "so", "even though", "after",
              "before", "until", "whereas", "since")
EXTRA = ("Honestly,", "In 2023,", "According to the report,", "Surprisingly,", "Meanwhile,",
         "At 7:45 a.m.,", "On Tuesday,", "For example,", "In other words,", "Unfortunately,")
WORDS = ("data", "model", "river", "music", "energy", "garden", "history", "question", "window",
         "planet", "language", "market", "silence", "journey", "machine", "forest", "village",
         "memory", "science", "ocean", "theory", "signal", "pattern", "network", "harvest",
         "mushroom", "poisonous", "beautiful", "quantum", "transformer", "attention", "kernel")


def _clause(rng):
    parts = [SUBJECTS[rng.integers(len(SUBJECTS))], VERBS[rng.integers(len(VERBS))],
             OBJECTS[rng.integers(len(OBJECTS))]]
    if rng.random() < 0.5:
        parts.append(ADVERBS[rng.integers(len(ADVERBS))])
    return " ".join(parts)


def _sentence(rng, n_clauses):
    text = _clause(rng)
    for _ in range(n_clauses - 1):
        text += f" {CONNECTORS[rng.integers(len(CONNECTORS))]} {_clause(rng)}"
    if rng.random() < 0.3:
        text = f"{EXTRA[rng.integers(len(EXTRA))]} {text}"
    text = text[0].upper() + text[1:]
    return text + (".", "!", "?", ";")[rng.choice(4, p=(0.8, 0.08, 0.1, 0.02))]


def make_corpus(n=1000, seed=0):
    """n sentences of mixed length, deterministic for a given (n, seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.15:      # keyword queries: 1-6 words
            k = int(rng.integers(1, 7))
            out.append(" ".join(WORDS[i] for i in rng.integers(len(WORDS), size=k)))
        elif kind < 0.80:    # one sentence, 1-3 clauses (~5-35 words)
            out.append(_sentence(rng, int(rng.integers(1, 4))))
        elif kind < 0.96:    # short paragraph: 2-5 sentences (~30-120 words)
            out.append(" ".join(_sentence(rng, int(rng.integers(1, 4)))
                                for _ in range(int(rng.integers(2, 6)))))
        else:                # long paragraph: 8-18 sentences, some past 256 tokens
            out.append(" ".join(_sentence(rng, int(rng.integers(1, 3)))
                                for _ in range(int(rng.integers(8, 19)))))
    return out


if __name__ == "__main__":
    c = make_corpus()
    words = np.array([len(s.split()) for s in c])
    print(f"{len(c)} sentences; words per sentence: min {words.min()}, median "
          f"{int(np.median(words))}, mean {words.mean():.1f}, max {words.max()}")
    for s in c[:5]:
        print(" ", s[:120])
