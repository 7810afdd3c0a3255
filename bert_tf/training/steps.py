"""The compiled steps of the training loop: one update, one eval batch, one predict batch.

Each replica gets its share of the global batch. A task's loss is a set of terms, each a sum over
examples divided by a normalizer summed over the GLOBAL batch (all replicas, all accumulation
micro-batches), so the loss and its gradient do not depend on how the batch is split:

    loss = Σ_term  Σ_global losses[term] / (Σ_global loss_normalizers[term] + loss_epsilons[term])

The normalizers come from the features only, so they are all-reduced before the forward pass;
each replica then differentiates its own share, and the optimizer sums the shares (see
`bert_tf.training.optimizers`: one all-reduce, then global-norm clipping).

Variables the loss does not reach (e.g. the pooler under a span or tagging head) get no
gradient: as in the original, they are left out of the update altogether (no Adam step, no weight
decay) and out of the global norm used for clipping. Which variables those are is known when the
step is traced, so every replica and every micro-batch leaves out the same ones. Variables that
only some batches reach (a multi-task run's heads: `Task.variable_groups`) are left as they are,
moments included, on the steps whose batches do not train them (`Task.trained_groups`).

Every step returns GLOBAL figures (identical on every replica), see `_figures`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import tensorflow as tf

SUM = tf.distribute.ReduceOp.SUM
# Figures reported at their last step's value rather than summed over a loop's steps.
LAST_VALUE_FIGURES = ("learning_rate",)


def _all_reduce(values):
    """Sums `values` (a nested structure of tensors) over all replicas; identity on one replica."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values
    return context.all_reduce(SUM, values)


def _loss(task, losses: Mapping[str, tf.Tensor], normalizers: Mapping[str, tf.Tensor]
          ) -> tf.Tensor:
    """Σ_term sum / (global normalizer + the term's epsilon); a term with 0/0 gives 0.

    With this replica's sums it is the replica's share of the global loss; with global sums, the
    global loss.
    """
    if set(losses) != set(normalizers):
        raise ValueError(f"Task.losses names {sorted(losses)} differ from Task.loss_normalizers "
                         f"names {sorted(normalizers)}.")
    epsilons = task.loss_epsilons
    return tf.add_n([tf.math.divide_no_nan(tf.cast(losses[name], tf.float32),
                                           normalizers[name] + epsilons.get(name, 0.0))
                     for name in sorted(losses)])


def _figures(task, losses, normalizers, metrics, counts) -> dict[str, tf.Tensor]:
    """Local sums → the step's global figures (one all-reduce for all of them).

    "loss" is the step's loss; every other figure is a pair "<name>/sum", "<name>/weight" whose
    ratio is a weighted mean ("<term>_loss" for each loss term, then each metric), or the
    task's counts "<name>/counts", so that the figures of several steps or eval batches add up.
    """
    sums = {f"{name}/sum": tf.cast(total, tf.float32) for name, (total, _) in metrics.items()}
    sums.update({f"{name}/counts": tf.cast(value, tf.float32) for name, value in counts.items()})
    sums.update({f"{name}/weight": tf.cast(weight, tf.float32)
                 for name, (_, weight) in metrics.items()})
    sums.update({f"{name}_loss/sum": tf.cast(value, tf.float32) for name, value in losses.items()})
    figures = _all_reduce(sums)
    figures.update({f"{name}_loss/weight": normalizers[name] for name in losses})
    figures["loss"] = _loss(task, {name: figures[f"{name}_loss/sum"] for name in losses},
                            normalizers)
    return figures


def _global_normalizers(task, features) -> dict[str, tf.Tensor]:
    local = {name: tf.cast(value, tf.float32)
             for name, value in task.loss_normalizers(features).items()}
    return tf.nest.map_structure(tf.stop_gradient, _all_reduce(local))


def _split(features: Mapping[str, tf.Tensor], parts: int) -> dict[str, tf.Tensor]:
    """[B,...] → [parts, B/parts, ...] for every feature (micro-batches along axis 0)."""
    def split(tensor):
        shape = tf.shape(tensor)
        return tf.reshape(tensor, tf.concat([[parts, shape[0] // parts], shape[1:]], 0))
    return {name: split(tensor) for name, tensor in features.items()}


def _needs_static_shapes(jit_compile: bool = False) -> bool:
    return jit_compile or isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy)


def make_train_step(task, model, optimizer, *, accumulation_steps: int, loss_scale: bool,
                    jit_compile: bool) -> Callable[[Mapping[str, tf.Tensor]], dict]:
    """Returns `step(features) -> figures`, run on each replica by `strategy.run`.

    Args:
        task: the `training.Task`.
        model: its keras.Model (built, inside the strategy's scope).
        optimizer: from `optimization.create_optimizer` (a `LossScaleOptimizer` if loss_scale).
        accumulation_steps: micro-batches per replica batch; their gradients are summed.
        loss_scale: multiply the loss by the optimizer's dynamic loss scale (float16).
        jit_compile: XLA-compile the forward and backward passes (and, on one replica, the
            optimizer update as well: several replicas need a merge step XLA cannot hold).
    """
    variables = model.trainable_variables
    static_shapes = _needs_static_shapes(jit_compile)
    grouped = task.variable_groups(model) is not None

    def gradients(features, normalizers):
        with tf.GradientTape() as tape:
            outputs = task.forward(model, features, training=True,
                                   static_shapes=static_shapes)
            losses = task.losses(features, outputs)
            loss = _loss(task, losses, normalizers)
            if loss_scale:
                loss = optimizer.scale_loss(loss)
        # {index in `variables`: dense gradient}, without the variables that have none.
        grads = {i: tf.convert_to_tensor(g)
                 for i, g in enumerate(tape.gradient(loss, variables)) if g is not None}
        if not grads:
            raise ValueError("the loss reaches none of the model's trainable variables: check "
                             "Task.losses and Task.forward")
        return grads, losses, task.metrics(features, outputs), task.counts(features, outputs)

    def accumulated_gradients(features, normalizers):
        if accumulation_steps == 1:
            return gradients(features, normalizers)
        micro = _split(features, accumulation_steps)
        # Traced once although called twice below (first micro-batch, loop body).
        micro_gradients = tf.function(gradients, autograph=False)

        def micro_batch(j):
            return {name: tensor[j] for name, tensor in micro.items()}

        def add_next(j, totals):
            part = micro_gradients(micro_batch(j), normalizers)
            return j + 1, tf.nest.map_structure(tf.add, totals, part)

        _, totals = tf.while_loop(lambda j, _: j < accumulation_steps, add_next,
                                  (tf.constant(1), micro_gradients(micro_batch(0), normalizers)))
        return totals

    def apply(grads):
        learning_rate = tf.cast(optimizer.learning_rate, tf.float32)
        present = sorted(grads)
        optimizer.apply([grads[i] for i in present], [variables[i] for i in present])
        return learning_rate, tf.cast(optimizer.gradient_norm, tf.float32)

    one_replica = tf.distribute.get_strategy().num_replicas_in_sync == 1

    def compute_and_apply(features, normalizers):
        grads, *figures = accumulated_gradients(features, normalizers)
        return apply(grads), *figures

    if jit_compile and one_replica:
        compute_and_apply = tf.function(compute_and_apply, jit_compile=True, autograph=False)
    elif jit_compile:
        accumulated_gradients = tf.function(accumulated_gradients, jit_compile=True,
                                            autograph=False)

    def step(features):
        normalizers = _global_normalizers(task, features)
        if grouped:  # the groups any replica's batch trains
            trained = _all_reduce(tf.cast(task.trained_groups(features), tf.float32)) > 0
            getattr(optimizer, "inner_optimizer", optimizer).set_trained_groups(trained)
        (learning_rate, gradient_norm), losses, metrics, counts = compute_and_apply(features,
                                                                                   normalizers)
        figures = _figures(task, losses, normalizers, metrics, counts)
        figures["learning_rate"] = learning_rate
        figures["gradient_norm"] = gradient_norm
        return figures

    # A tf.function so that the loop's several calls share one trace. No AutoGraph anywhere:
    # converting the model's code costs seconds and the loops are explicit tf.while_loops.
    return tf.function(step, autograph=False)


def make_eval_step(task, model) -> Callable[[Mapping[str, tf.Tensor]], dict]:
    """Returns `step(features) -> figures` (no update); run on each replica by `strategy.run`."""
    static_shapes = _needs_static_shapes()

    def step(features):
        normalizers = _global_normalizers(task, features)
        outputs = task.forward(model, features, training=False, static_shapes=static_shapes)
        return _figures(task, task.losses(features, outputs), normalizers,
                        task.metrics(features, outputs), task.counts(features, outputs))
    return step


def make_predict_step(task, model) -> Callable[[Mapping[str, tf.Tensor]], dict]:
    """Returns `step(features) -> task.predictions(...)` for one replica's batch."""
    static_shapes = _needs_static_shapes()

    def step(features):
        outputs = task.forward(model, features, training=False, static_shapes=static_shapes)
        return task.predictions(features, outputs)
    return step


def first_replica(strategy: tf.distribute.Strategy, value: Any) -> Any:
    """The first local replica's copy of a value that is identical on every replica."""
    return tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0], value)


def make_train_loop(strategy: tf.distribute.Strategy, step: Callable,
                    notice: tf.Variable | None = None) -> Callable:
    """Returns a tf.function `loop(iterator, steps) -> (figures, steps_run, noticed)`: the figures
    summed over the steps (those of LAST_VALUE_FIGURES: the last step's), how many steps ran and
    whether a preemption notice ended the call.

    `steps` (int32 scalar tensor, ≥ 1) updates run in one call: one host round trip for many
    updates (the original's `iterations_per_loop`). With `notice` (a float32 scalar variable of
    this process, > 0 once a preemption notice came, see `bert_tf.training.preemption`) the call
    ends after the first step at which any worker has seen a notice: every call still runs at
    least one step, and all workers stop after the same one (with several workers the notices
    are summed by an all-reduce after every step).
    """
    def one_step(iterator):
        return first_replica(strategy, strategy.run(step, args=(next(iterator),)))

    def noticed():
        if notice is None:
            return tf.constant(False)
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return tf.identity(notice) > 0  # one process: its own notice (host side, TPU too)
        total = strategy.run(lambda: _all_reduce(tf.identity(notice)))
        return first_replica(strategy, total) > 0

    def add(totals, figures):
        return {name: value if name in LAST_VALUE_FIGURES else totals[name] + value
                for name, value in figures.items()}

    @tf.function(autograph=False)
    def loop(iterator, steps):
        def add_next(i, totals, _):
            totals = add(totals, one_step(iterator))
            with tf.control_dependencies(tf.nest.flatten(totals)):
                return i + 1, totals, noticed()

        # Sums start from zeros shaped like the figures (traced, never run), not from a first
        # step outside the loop: with one copy of the step in the graph, TensorFlow optimises
        # it once, which saves about a fifth of a run's start-up.
        figures = tf.function(one_step, autograph=False).get_concrete_function(iterator)
        zeros = tf.nest.map_structure(lambda t: tf.zeros(t.shape, t.dtype),
                                      figures.structured_outputs)
        done, totals, stop = tf.while_loop(lambda i, _, stop: tf.logical_and(i < steps,
                                                                           tf.logical_not(stop)),
                                        add_next, (tf.constant(0), zeros, tf.constant(False)))
        return totals, done, stop
    return loop
