"""Two logical CPU devices for tests of tf.distribute code (MirroredStrategy over 2 replicas).

Call `configure_two_cpus()` at import time of a test module: pytest imports every test module
before running any test, and TensorFlow only accepts a device layout before it first runs an op.
"""

import functools

import tensorflow as tf


def configure_two_cpus() -> None:
    """Splits the physical CPU into 2 logical devices, if TensorFlow has not started yet."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    if len(tf.config.get_logical_device_configuration(cpu) or []) >= 2:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:  # Already initialised; two_cpu_strategy() reports it.
        pass


@functools.lru_cache(maxsize=None)
def two_cpu_strategy() -> tf.distribute.MirroredStrategy:
    """THE MirroredStrategy over CPU:0 and CPU:1 of this process (fails clearly if missing).

    One shared instance: a second MirroredStrategy over the same devices restarts the collective
    instance keys, and its all-reduces then clash with the first one's ("Shape mismatch in the
    collective instance").
    """
    cpus = tf.config.list_logical_devices("CPU")
    assert len(cpus) >= 2, ("TensorFlow started before configure_two_cpus() ran: call it at the "
                            "top of the test module, before any TensorFlow op.")
    return tf.distribute.MirroredStrategy([cpus[0].name, cpus[1].name])
