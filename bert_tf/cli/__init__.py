"""The scripts' plumbing: what the command lines share and the library does not use.

- `boundary`: the error boundary, `run_main(main)` in place of `absl.app.run(main)` (one
  `error:` line for the user's mistakes, tracebacks for bugs). It is this package's face:
  `from bert_tf import cli; cli.run_main(main)`.
- `run_lock`: one run per output directory, taken by each script's `main()` around its call.
- `flags`: the absl flags the scripts share and their readers (`run_config_from_flags`,
  `strategy_from_flags`, `options_from_flags`); the task folders' `flags.py` build on them.

May import training and what lies below it; the tasks' `flags.py` and the workflows import it.
Importing the package (or `run_lock`) loads no TensorFlow: `create_pretraining_data.py` runs
without it. `flags` reads the training loop's RunConfig and strategies, so it loads TensorFlow.
"""

from bert_tf.cli.boundary import (FLAG_ERROR_STATUS, TRACEBACK_ENV, USER_ERROR_STATUS, fail,
                                  parse_flags, run_main, traceback_requested, user_error_message)

__all__ = ["FLAG_ERROR_STATUS", "TRACEBACK_ENV", "USER_ERROR_STATUS", "fail", "parse_flags",
           "run_main", "traceback_requested", "user_error_message"]
