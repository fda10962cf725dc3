"""SentenceEncoder.encode is batch-invariant: a sentence's embedding has the
same bits whatever else is in its batch — encoded alone, in batches of 7 or
32, or in shuffled company (other sentences, other padded lengths). This is
what lets cattn.distributed split a corpus any way and still return the bits
of one `encode` call, and makes embeddings usable as cache / dedup keys.

Where it can break: the token-wise GEMMs run on the T real tokens of a batch
(T changes with the company: a few-row GEMM must sum in the same order as a
many-row one); attention runs on the batch's padded length L (masked
padding keys and padding query rows must not change the real rows); pooling
and normalization are per row (np.add.reduceat per sequence, einsum per row:
no cross-row sums).

The fast test takes ~140 sentences of the benchmark corpus (every one of
<= 12 tokens among the first 400, a sample of the others, and the two
longest, which pad their company past 192 keys); test_full_corpus (marked
slow) checks all 1,000: alone, batches of 7 and 32, shuffled groups of 32.
"""

import numpy as np
import pytest

import cattn

from cattn_testing.minilm import corpus, require_model  # noqa: E402

require_model()

from cattn.models import SentenceEncoder  # noqa: E402

@pytest.fixture(scope="module")
def enc():
    return SentenceEncoder.from_pretrained()


def n_tokens(enc, sentences):
    return np.array([len(e.ids) for e in enc._encode_tokens(sentences)])


def fast_subset(enc):
    """Every sentence of <= 12 tokens among the first 400 of the corpus, every
    16th of the others, and the 2 longest of the 1,000 (> 192 tokens)."""
    c = corpus(1000)
    lens = n_tokens(enc, c)
    head = [i for i in range(400) if lens[i] <= 12 or i % 16 == 0]
    longest = [int(i) for i in np.argsort(-lens, kind="stable")[:2]]
    return [c[i] for i in head + [i for i in longest if i not in head]]


def assert_same_bits(enc, got, want, sentences, how):
    diff = (got != want).any(axis=1)
    if diff.any():
        lens = n_tokens(enc, [s for s, d in zip(sentences, diff) if d])
        err = float(np.abs(got - want).max())
        pytest.fail(f"{how}: {int(diff.sum())} of {len(sentences)} embeddings differ from the "
                    f"sentence encoded alone (max abs diff {err:.3g}); their token counts: "
                    f"{sorted(set(lens.tolist()))[:25]}")


def encode_alone(enc, sentences):
    """Each sentence its own encode call, on 1 thread (the batches run on the
    default threads: results are also thread-count-invariant, and many tiny
    calls are cheapest on one thread of a busy machine)."""
    with cattn.num_threads(1):
        return np.stack([enc.encode([s])[0] for s in sentences])


def check_invariance(enc, sentences, groups=((32, 32),), seed=0):
    alone = encode_alone(enc, sentences)
    for bs in (7, 32):
        assert_same_bits(enc, enc.encode(sentences, batch_size=bs), alone, sentences,
                         f"batch_size={bs}")
    # shuffled company: random groups of 32 (and of 7), each its own encode call,
    # so each sentence meets other sentences and other padded lengths
    rng = np.random.default_rng(seed)
    for group, bs in groups:
        perm = rng.permutation(len(sentences))
        got = np.empty_like(alone)
        for start in range(0, len(perm), group):
            idx = perm[start:start + group]
            got[idx] = enc.encode([sentences[i] for i in idx], batch_size=bs)
        assert_same_bits(enc, got, alone, sentences, f"shuffled groups of {group}, batch_size={bs}")
    return alone


def test_batch_invariance(enc):
    sentences = fast_subset(enc)
    assert 120 <= len(sentences) <= 160
    alone = check_invariance(enc, sentences, groups=((32, 32), (7, 7)))
    # short sentences padded to a long one's length (> 192 keys), one batch
    longest = max(sentences, key=len)
    shorts = [i for i, n in enumerate(n_tokens(enc, sentences)) if n <= 12][:31]
    got = enc.encode([longest] + [sentences[i] for i in shorts], batch_size=32)[1:]
    assert_same_bits(enc, got, alone[shorts], [sentences[i] for i in shorts],
                     "short sentences padded to a long one's length")


def test_edge_texts_batch_invariant(enc):
    texts = ["", "a", "\ufffd", "x " * 600, "Hello world.", "東京は日本の首都です。"]
    alone = encode_alone(enc, texts)
    assert_same_bits(enc, enc.encode(texts, batch_size=4), alone, texts, "edge texts")


@pytest.mark.slow
def test_full_corpus(enc):
    check_invariance(enc, corpus(1000), seed=1)
