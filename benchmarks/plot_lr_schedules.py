"""Plots every --lr_schedule curve, as bert_tf.training.schedules computes it, to a PNG.

    python benchmarks/plot_lr_schedules.py --output docs/lr_schedules.png

One run of 1000 updates with 100 of warm-up (--warmup_proportion=0.1) at --learning_rate=5e-5;
cosine and polynomial end at --lr_end=5e-6, polynomial with --lr_power=2. Needs matplotlib,
which bert_tf itself does not (pip install matplotlib). Prints one JSON line per curve: its
rate at a few steps, the figures the plot shows.
"""

import argparse
import json
import sys

import numpy as np

from bert_tf.training import schedules

LR, TOTAL, WARMUP, LR_END, POWER = 5e-5, 1000, 100, 5e-6, 2.0
CURVES = {"linear (default)": ("linear", {}),
          "cosine, --lr_end=5e-6": ("cosine", {"lr_end": LR_END}),
          "constant": ("constant", {}),
          "polynomial, --lr_end=5e-6 --lr_power=2": ("polynomial",
                                                    {"lr_end": LR_END, "lr_power": POWER}),
          "inverse_sqrt": ("inverse_sqrt", {})}


def rates(schedule: str, options: dict) -> np.ndarray:
    """The rate of each update 0 … TOTAL−1."""
    curve = schedules.learning_rate_schedule(schedule, LR, TOTAL, WARMUP, **options)
    return np.asarray(curve(np.arange(TOTAL, dtype=np.float32)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="docs/lr_schedules.png", help="PNG to write.")
    args = parser.parse_args()
    try:
        import matplotlib
    except ImportError:
        sys.exit("error: benchmarks/plot_lr_schedules.py needs matplotlib: pip install matplotlib")
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(10, 4.5), dpi=100)
    for label, (schedule, options) in CURVES.items():
        values = rates(schedule, options)
        axes.plot(np.arange(TOTAL), values, label=label)
        print(json.dumps({"lr_schedule": schedule, **options,
                          **{f"lr_at_{step}": float(values[step])
                             for step in (0, 50, WARMUP, 500, TOTAL - 1)}}))
    axes.axvline(WARMUP, color="grey", linestyle=":", linewidth=1)
    axes.set_xlabel(f"update (--num_warmup_steps={WARMUP} of {TOTAL})")
    axes.set_ylabel("learning rate")
    axes.set_title(f"--lr_schedule at --learning_rate={LR:g}")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(args.output)
    print(json.dumps({"written": args.output}))


if __name__ == "__main__":
    main()
