"""Chinese text preparation: script conversion (OpenCC) and word segmentation (jieba).

Both need the optional extra `chinese` (`pip install -e '.[cpu,chinese]'`); the packages are
imported only when a flag asks for them. May import nothing else of bert_tf.
"""
