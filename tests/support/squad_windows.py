"""All SQuAD windows of a few examples in memory, for tests (runs stream them: `iter_features`)."""

from bert_tf.tasks.squad import features as squad_features


def squad_windows(examples, tokenizer, max_seq_length: int, doc_stride: int,
                  max_query_length: int, is_training: bool):
    """(SquadFeatures of every window, FeatureStats), from `iter_features`' chunks."""
    stats = squad_features.FeatureStats()
    chunks = list(squad_features.iter_features(examples, tokenizer, max_seq_length, doc_stride,
                                               max_query_length, is_training, stats))
    return squad_features.SquadFeatures.concatenate(chunks, max_seq_length), stats
