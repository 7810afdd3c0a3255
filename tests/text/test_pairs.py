"""The original's sentence-pair trimming, computed without its token-by-token loop."""

from bert_tf.text.pairs import truncate_pair_lengths


def _trim_loop(len_a, len_b, max_total):
    while len_a + len_b > max_total:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def test_truncate_pair_lengths_matches_the_token_by_token_loop():
    for len_a in range(12):
        for len_b in range(12):
            for max_total in range(14):
                assert truncate_pair_lengths(len_a, len_b, max_total) == \
                    _trim_loop(len_a, len_b, max_total), (len_a, len_b, max_total)
