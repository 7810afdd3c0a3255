"""What checking a cache or a part before reuse costs (`bert_tf.records.file_checks`), by file size.

For each size: a file of framed TFRecords is written (with its summary computed while writing, as
the caches and parts do), then checked (`file_checks.mismatch`: size + CRC-32 of every byte), and
read once plainly for comparison. The check is one read of the file plus zlib's CRC-32; the
figures are seconds and the check's time as a ratio of the plain read (page cache warm, as when a
run reuses a file it just wrote) and of writing the file.

    python benchmarks/file_checks.py --sizes_mb=16,64,256
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from bert_tf.records import file_checks, tfrecord


def _framed(size_mb: int, record_bytes: int = 512) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(0)
    records = max(1, size_mb * (1 << 20) // (record_bytes + 16))
    data = rng.integers(0, 256, records * record_bytes, dtype=np.uint8)
    offsets = np.arange(records + 1, dtype=np.int64) * record_bytes
    return tfrecord.frame_records(data, offsets)[0], records


def _best(function, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(size_mb: int, directory: str) -> dict[str, float]:
    framed, records = _framed(size_mb)
    path = os.path.join(directory, f"cache-{size_mb}.tf_record")
    summary = file_checks.Summary()

    def write() -> None:
        summary.__init__()
        summary.update(framed, records)
        with open(path, "wb") as f:
            f.write(framed.tobytes())

    def read() -> None:
        with open(path, "rb") as f:
            while f.read(1 << 22):
                pass

    written = _best(write)
    expected = summary.as_dict()
    assert file_checks.mismatch(path, expected) is None
    checked = _best(lambda: file_checks.mismatch(path, expected))
    plain = _best(read)
    os.remove(path)
    return {"mb": framed.nbytes / (1 << 20), "write_s": written, "check_s": checked, "read_s": plain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes_mb", default="16,64,256")
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        print(f"{'MB':>8} {'write s':>8} {'check s':>8} {'read s':>8} {'check MB/s':>10} "
              f"{'check/read':>10} {'check/write':>11}")
        for size in (int(s) for s in args.sizes_mb.split(",")):
            m = measure(size, directory)
            print(f"{m['mb']:8.1f} {m['write_s']:8.3f} {m['check_s']:8.3f} {m['read_s']:8.3f} "
                  f"{m['mb'] / m['check_s']:10.0f} {m['check_s'] / m['read_s']:10.2f} "
                  f"{m['check_s'] / m['write_s']:11.2f}")


if __name__ == "__main__":
    main()
