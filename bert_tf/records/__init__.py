"""Records: TFRecord framing (`tfrecord`), every schema once with its writer (`features`), the
tf.data readers (`datasets`), shared by all tasks.
May import infrastructure (`bert_tf.errors`) only.
"""
