"""What the tests share: tiny models and vocabularies, numpy references, the Hugging Face parity
harness, the in-process and forked script runners, and the scripts the tests start by path.

Test modules import it as `support` (pytest puts tests/ on sys.path through tests/conftest.py);
the scripts here started by path put the checkout and tests/ on sys.path themselves."""
