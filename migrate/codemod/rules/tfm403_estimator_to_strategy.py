"""TFM403 estimator-to-strategy: the rule orchestrates; each stage is a module.

analysis
    _tfm403_analysis.py (the statement that trains, the Estimator, RunConfig,
    TrainSpec/EvalSpec, the model_fn and input_fns); _tfm403_origin.py (where a
    model_fn or input_fn imported from another module is, for the reason);
    _tfm403_premade.py (the reasons of premade Estimators and Experiment jobs)
plan
    _tfm403_plan.py (the model_fn as the step calls it, the optimizer and
    learning-rate statements built once under the strategy); _tfm403_returns.py
    (what its modes return besides the loss: TRAIN summaries, PREDICT outputs,
    EVAL metrics)
emitted code
    _tfm403_emit.py (strategy, step, per-worker dataset, checkpoints, logging,
    evaluation); _tfm403_export.py (SavedModel exports and predict: analysis of
    the receivers and exporters, and their code)
"""

from __future__ import annotations

import ast

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules import _tfm403_emit as E
from migrate.codemod.rules import _tfm403_export as X
from migrate.codemod.rules._equivalents import bind_args
from migrate.codemod.rules._tfm403_analysis import (
    PREDICT_ARGS,
    Decline,
    EstimatorJob,
    Finder,
    dataset_factory,
    dataset_input_fn,
    factory_input_fn,
)
from migrate.codemod.rules._tfm403_plan import plan_model_fn, rename
from migrate.codemod.rules._tfm403_premade import experiment_decline

REFERENCE = "https://www.tensorflow.org/tutorials/distribute/parameter_server_training"
_PREDICTS = ("predict", "export_savedmodel", "export_saved_model", "experimental_export_all_saved_models")


def _taken(module: cst.Module, block: cst.CSTNode) -> set[str]:
    """Names the emitted code may not bind: what the module and the block bind or
    read, and what other functions read from outside (their locals are theirs)."""
    others = [st for st in module.body if isinstance(st, (cst.FunctionDef, cst.ClassDef)) and st is not block]
    rest = module.with_changes(body=[st for st in module.body if st not in others])
    taken = C.all_names(rest) | {st.name.value for st in others}
    for st in others:
        tree = ast.parse(C.code_of(cst.Module(body=[st.with_changes(decorators=[])])))
        local = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        taken |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in local}
    return taken


def _same_training(plan, other, job, fn) -> None:
    """The model_fns an if statement chooses between train alike (one loop carries them)."""
    mine = (plan.params, C.code_of(plan.optimizer), [C.code_of(st) for st in plan.hoisted], plan.metrics,
            C.code_of(plan.log_every) if plan.log_every is not None else None, plan.summaries)
    theirs = (other.params, C.code_of(other.optimizer), [C.code_of(st) for st in other.hoisted], other.metrics,
              C.code_of(other.log_every) if other.log_every is not None else None, other.summaries)
    for what, a, b in zip(("parameters", "optimizer", "learning-rate schedule", "eval_metric_ops", "logging hook",
                           "summaries"), mine, theirs):
        if a != b:
            raise Decline(job.chosen_in, f"the model_fns the if statement chooses between"
                          f" (`{job.model_fn.name.value}`, `{fn.name.value}`) differ in their {what}: one training"
                          " loop built under the strategy cannot carry both", hint="migrate this job by hand")


def _choose_model_fn(job, names: dict[str, str], takes_params: bool) -> cst.If:
    """Each branch's ``est = tf.estimator.Estimator(model_fn=f, params=p, ...)`` ->
    ``model_fn = f`` (and ``params = p``): the migrated loop calls what the branch chose."""
    new: dict[int, cst.CSTNode] = {}
    for call, fn in job.choices:
        code = f"{names['model_fn']} = {fn.name.value}\n"
        params = call.get("params")
        if takes_params and not (isinstance(params, cst.Name) and params.value == names["params"]):
            code += f"{names['params']} = {C.code_of(params) if params is not None else '{}'}\n"
        statements = C.stmts(code)
        statements[0] = statements[0].with_changes(leading_lines=call.statement.leading_lines)
        new[id(call.statement)] = cst.FlattenSentinel(statements)

    class _Bind(cst.CSTTransformer):
        def on_leave(self, original, updated):
            return new.get(id(original), updated)

    return job.chosen_in.visit(_Bind())


class EstimatorToStrategy(Rule):
    """Migrate a custom ``model_fn`` Estimator job to a tf.distribute training loop.

    What it does:
        ``tf.estimator.train_and_evaluate(Estimator(model_fn, config=RunConfig(...),
        params=...), TrainSpec(input_fn, max_steps), EvalSpec(...))`` (or
        ``estimator.train(input_fn, max_steps=...)``) becomes a training loop that
        keeps the user's ``model_fn`` and calls it in TRAIN mode inside a
        ``tf.function`` step (EVAL mode for evaluation):

        - the strategy from the job's TF_CONFIG as the Estimator read it: ps tasks ->
          ``ParameterServerStrategy`` with a ``ClusterCoordinator`` on the chief (the
          Estimator's chief trained as well: the migrated job's workers train, the
          chief coordinates); no ps (or no cluster) -> ``MultiWorkerMirroredStrategy``;
          ``RunConfig(train_distribute=...)`` -> that strategy;
        - the model_fn made once under the strategy with ``make_template`` and
          called by every step; ``optimizer.minimize(loss, global_step)`` -> the
          optimizer's Keras 3 equivalent (TF1's own where Keras has none with the
          same update, as TFM301 chooses) built once, ``apply_gradients`` in the
          step, the global step counting steps; ``tf.train.exponential_decay``
          and the other schedules of the global step -> Keras schedules;
        - ``input_fn`` -> its ``tf.data`` dataset made on every worker
          (``create_per_worker_dataset`` / ``distribute_datasets_from_function``);
          ``numpy_input_fn(x, y, ...)`` -> a function returning the same batches
          from ``Dataset.from_tensor_slices``; an input_fn returning its one-shot
          iterator's ``get_next()`` returns the dataset itself; an input_fn
          factory's call (``make_input_fn(files, 32)``) is called in turn;
        - ``RunConfig``: ``model_dir``, ``save_checkpoints_steps/secs``,
          ``keep_checkpoint_max`` -> ``tf.train.CheckpointManager`` (restored on
          start, saved at that cadence and at the end); ``tf_random_seed`` ->
          ``tf.random.set_seed``; ``log_step_count_steps`` -> the loss logged;
          ``TrainSpec(max_steps)`` -> the loop bound; ``EvalSpec(input_fn, steps,
          start_delay_secs, throttle_secs)`` -> evaluation of the model_fn's EVAL
          loss (and ``tf.metrics.accuracy``/``mean``/``root_mean_squared_error``,
          unweighted ``mean_squared_error``/``mean_absolute_error`` eval_metric_ops
          as Keras metrics; its results written as summaries in ``<model_dir>/eval``)
          on the chief after a checkpoint, at that cadence, and at the
          end; a TF_CONFIG ``evaluator`` task evaluates the chief's checkpoints as
          they come; ``est.train(...)`` then ``results = est.evaluate(...)`` ->
          the loop, then ``results = evaluate()``; ``save_summary_steps`` -> the
          loss summary; an inline ``session_config`` is dropped with a note;
        - a ``tf.train.LoggingTensorHook(tensors, every_n_iter=N)`` of the TrainSpec
          (or ``train(hooks=...)``; tensors by graph name) or of the TRAIN branch's
          ``EstimatorSpec(training_hooks=...)`` -> the TRAIN mode returns those
          tensors and the loop logs them on the first step and every N after;
          ``with tf.control_dependencies(tf.get_collection(UPDATE_OPS)):``
          around ``minimize`` goes (TFM104's batch normalization moves its
          averages with the step);
        - an Estimator chosen in the branches of an if statement (``if flag ==
          "cnn": est = Estimator(model_fn=cnn_fn, params=p) elif ...: ... else:
          sys.exit(1)``) -> each branch binds the model_fn and params it chose,
          one loop trains it (when the model_fns train alike);
        - ``tf.summary.scalar``/``histogram`` of the model_fn's TRAIN mode -> the
          TRAIN mode returns their values, the loop writes them every
          save_summary_steps under the same tags;
        - ``est.export_savedmodel(dir, serving_input_receiver_fn)`` after the job and
          ``EvalSpec(exporters=FinalExporter/LatestExporter)`` -> ``tf.saved_model.save``
          of the model_fn's PREDICT mode on the receiver's inputs (_tfm403_export);
          ``est.predict(input_fn)`` -> a generator of the PREDICT mode's predictions.

    Why:
        Estimator left TensorFlow in 2.16: such jobs do not run on TF 2.21.

    Example:
        ``tf.estimator.train_and_evaluate(est, TrainSpec(input_fn, max_steps=1000),
        EvalSpec(eval_input_fn))`` -> ``while step < 1000: loss =
        coordinator.schedule(train_step, args=(iterator,))`` with the strategy,
        step and checkpoints around it.

    Fix safety:
        Only what is carried exactly is migrated (``numpy_input_fn(shuffle=True)``
        draws another random order, reported); anything else (other hooks, other
        metrics, summaries outside TRAIN or of tf.metrics values, exports of
        classification/regression outputs or of receivers computing features of an
        unknown structure, a model_fn reading its RunConfig, queue-based input, a model_fn or input_fn
        of another module (``model.model_fn`` of ``trainer/model.py``: its rewrite
        would have to happen there, in the same run), the train op built
        otherwise than ``minimize(loss, global_step)``, an Estimator trained in a
        loop, a premade Estimator (the reason names its numerics and the TF2 port),
        a tf.contrib.learn Experiment (at its first blocker), a model_fn building
        Keras layers (made anew at every step) or running a tf.layers / tf.contrib
        layer TFM104 left) is reported where it is, and the job is left
        as it was (TFM401 then names the replacements).
    """

    code = "TFM403"
    name = "estimator-to-strategy"
    triggers = ("estimator",)

    VALID = (
        Valid(
            """
            import tensorflow as tf

            def model_fn(features, labels, mode):
                return tf.estimator.EstimatorSpec(mode, loss=tf.reduce_sum(features))

            est = make_estimator(model_fn)  # not tf.estimator.Estimator: nothing this rule knows
            est.train(input_fn, max_steps=10)
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf


            def input_fn():
                return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat().batch(2)


            def model_fn(features, labels, mode, params):
                w = tf.compat.v1.get_variable("w", [1, 1], initializer=tf.compat.v1.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
                learning_rate = tf.compat.v1.train.exponential_decay(
                    params["lr"], tf.compat.v1.train.get_global_step(), 100, 0.9)
                optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
                train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
                return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


            config = tf.estimator.RunConfig(model_dir="/tmp/m", save_checkpoints_steps=10, tf_random_seed=1)
            est = tf.estimator.Estimator(model_fn=model_fn, config=config, params={"lr": 0.1})
            tf.estimator.train_and_evaluate(
                est, tf.estimator.TrainSpec(input_fn, max_steps=50), tf.estimator.EvalSpec(input_fn, steps=2))
            """,
            """
            import tensorflow as tf
            import os
            import time
            from absl import logging


            def input_fn():
                return tf.data.Dataset.from_tensor_slices(({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])).repeat().batch(2)


            def model_fn(features, labels, mode, params):
                w = tf.compat.v1.get_variable("w", [1, 1], initializer=tf.compat.v1.zeros_initializer())
                loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
                return loss


            cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            if cluster_resolver.task_type == "evaluator":
                # TF_CONFIG's evaluator task evaluates the chief's checkpoints, as the Estimator's did.
                strategy = tf.distribute.get_strategy()
                coordinator = None
            elif "ps" in cluster_resolver.cluster_spec().jobs:
                # ps tasks in TF_CONFIG: asynchronous training, as the Estimator's was. The chief
                # coordinates and every worker trains; the ps and worker tasks serve until the job ends.
                if cluster_resolver.task_type in ("ps", "worker"):
                    tf.distribute.Server(
                        cluster_resolver.cluster_spec(), job_name=cluster_resolver.task_type,
                        task_index=cluster_resolver.task_id, protocol=cluster_resolver.rpc_layer or "grpc", start=True,
                    ).join()
                strategy = tf.distribute.ParameterServerStrategy(cluster_resolver)
                coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
            else:
                # No ps tasks (or no cluster): every task trains, synchronously.
                strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)
                coordinator = None
            is_chief = coordinator is not None or cluster_resolver.task_type in (None, "chief")
            params = {"lr": 0.1}
            tf.random.set_seed(1)

            with strategy.scope():
                global_step = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                # The optimizer calls this schedule with its iterations, which advance once per step
                # as the global step did.
                learning_rate = tf.keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=params["lr"], decay_steps=100, decay_rate=0.9)
                optimizer = tf.keras.optimizers.SGD(learning_rate=learning_rate)
                model = tf.compat.v1.make_template("model", model_fn)
                # Build the model's variables once, under the strategy, as the Estimator's graph did.
                features, labels = tf.nest.map_structure(
                    lambda spec: tf.zeros([1 if d is None else d for d in spec.shape], spec.dtype),
                    input_fn().element_spec)
                model(features, labels, mode="train", params=params)
            trainable_variables = model.trainable_variables


            @tf.function
            def train_step(iterator):
                def replica_step(features, labels):
                    with tf.GradientTape() as tape:
                        loss = model(features, labels, mode="train", params=params)
                        # the strategy sums the replicas' gradients; the Estimator averaged them
                        scaled_loss = loss / strategy.num_replicas_in_sync
                    gradients = tape.gradient(scaled_loss, trainable_variables)
                    optimizer.apply_gradients(zip(gradients, trainable_variables))
                    global_step.assign_add(1)
                    return loss
                losses = strategy.run(replica_step, args=next(iterator))
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)


            @tf.function
            def eval_step(features, labels):
                return model(features, labels, mode="eval", params=params)


            def evaluate():
                # The Estimator's evaluation of the latest variables, on the chief.
                losses = [eval_step(features, labels) for features, labels in input_fn().take(2)]
                results = {}
                results["loss"] = float(tf.reduce_mean(losses))
                results["global_step"] = int(global_step.numpy())
                logging.info("Saving dict for global step %d: %s", results["global_step"], results)
                # the evaluation's summaries, where the Estimator wrote them (<model_dir>/eval)
                eval_writer = tf.summary.create_file_writer(os.path.join("/tmp/m", "eval"))
                with eval_writer.as_default(step=results["global_step"]):
                    for name, value in results.items():
                        if name != "global_step":
                            tf.summary.scalar(name, value)
                eval_writer.close()
                return results


            checkpoint = tf.train.Checkpoint(global_step=global_step, optimizer=optimizer, model=model)
            checkpoint_manager = tf.train.CheckpointManager(checkpoint, "/tmp/m", max_to_keep=5)
            last_step = 50
            if cluster_resolver.task_type == "evaluator":
                for checkpoint_path in tf.train.checkpoints_iterator("/tmp/m", min_interval_secs=600):
                    checkpoint.restore(checkpoint_path).expect_partial()
                    evaluate()
                    if global_step.numpy() >= last_step:
                        break
            else:
                if coordinator is not None:
                    iterator = iter(coordinator.create_per_worker_dataset(lambda: input_fn()))
                else:
                    iterator = iter(strategy.distribute_datasets_from_function(
                        lambda input_context: input_fn()))
                if checkpoint_manager.latest_checkpoint:
                    checkpoint.restore(checkpoint_manager.latest_checkpoint)
                # the loss summary the Estimator's chief wrote every save_summary_steps steps
                summary_writer = tf.summary.create_file_writer("/tmp/m") if is_chief else tf.summary.create_noop_writer()
                step = int(global_step.numpy())
                next_eval = time.monotonic() + 120
                # the chief evaluates unless TF_CONFIG names an evaluator task, which then does (as the Estimator's)
                chief_evaluates = is_chief and "evaluator" not in cluster_resolver.cluster_spec().jobs
                while step < last_step:
                    if coordinator is not None:
                        loss = coordinator.schedule(train_step, args=(iterator,))
                    else:
                        loss = train_step(iterator)
                    step += 1
                    if step % 100 == 0:
                        logging.info("loss = %s, step = %d", loss.fetch() if coordinator is not None else loss.numpy(), step)
                    if step % 100 == 0:
                        with summary_writer.as_default(step=step):
                            tf.summary.scalar("loss", loss.fetch() if coordinator is not None else loss)
                    if step % 10 == 0 and step < last_step:
                        if coordinator is not None:
                            coordinator.join()
                        if is_chief:
                            checkpoint_manager.save(checkpoint_number=global_step)
                        if chief_evaluates and time.monotonic() >= next_eval:
                            evaluate()
                            next_eval = time.monotonic() + 600
                if coordinator is not None:
                    coordinator.join()
                if is_chief:
                    checkpoint_manager.save(checkpoint_number=global_step)
                if chief_evaluates:
                    evaluate()
            """,
            diagnostics=(),
        ),
        Invalid(
            """
            import tensorflow as tf


            def model_fn(features, labels, mode):
                loss = tf.reduce_sum(features)
                train_op = tf.compat.v1.train.AdamOptimizer().minimize(loss, tf.compat.v1.train.get_global_step())
                return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[hook])


            est = tf.estimator.Estimator(model_fn=model_fn, model_dir="/tmp/m")
            est.train(input_fn, max_steps=10)
            """,
            None,
            diagnostics=("TFM403",),
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        finder = Finder(module, self.qualname, self.ctx.path)
        jobs = finder.jobs()
        if not jobs:
            nested = finder.nested_jobs()[:1]
            for call, why in nested:
                self.report(call, f"Estimator job not migrated: {why}", hint="migrate such programs by hand",
                            reference=REFERENCE)
            experiment = None if nested else experiment_decline(module, self.qualname, self.ctx.path, finder.functions)
            if experiment is not None:
                node, why, hint = experiment
                self.report(node, f"Estimator job not migrated: {why}", hint=hint, reference=REFERENCE)
            return module
        if len(jobs) > 1:
            self.report(jobs[1][1], "the program trains more than one Estimator job: not migrated",
                        hint="migrate such programs by hand", reference=REFERENCE)
            return module
        block, trains = jobs[0]
        try:
            job = finder.job(block, trains)
            return self._migrate(module, finder, job)
        except Decline as d:
            self.report(d.node, f"Estimator job not migrated: {d.why}", hint=d.hint, reference=REFERENCE)
            return module

    def _migrate(self, module: cst.Module, finder: Finder, job: EstimatorJob) -> cst.Module:
        block_statements = list(job.block.body if isinstance(job.block, cst.Module) else C.body_of(job.block.body))
        exports = X.Exports()
        export_finder = X.ExportFinder(finder.functions, block_statements, self.qualname)
        exports.calls = [export_finder.export_call(line, call) for line, call in job.export_calls]
        if job.exporters is not None:
            exports.exporters = export_finder.exporters(job.exporters)
        export_lines = {id(c.line) for c in exports.calls}
        carried_calls = [c.call.func for c in exports.calls] + [c.func for c in job.predict_calls]
        predicts = any(
            isinstance(n, cst.Attribute) and n.attr.value in _PREDICTS and not any(
                n is func for func in carried_calls) for n in C.walk(module))
        logged = job.logging.tensors if job.logging is not None else None
        predictions = bool(job.predict_calls)
        plan = plan_model_fn(job.model_fn, self.qualname, predicts, logged, bool(exports), predictions)
        plans = {id(job.model_fn): plan}
        for _, fn in job.choices:
            if id(fn) not in plans:
                plans[id(fn)] = other = plan_model_fn(fn, self.qualname, predicts, logged, bool(exports),
                                                      predictions)
                _same_training(plan, other, job, fn)
                if other.predict_signatures != plan.predict_signatures:
                    raise Decline(job.chosen_in, "the model_fns the if statement chooses between export different"
                                  " signatures", hint="migrate this job by hand")
        if not plan.keras_optimizer and plan.hoisted:
            raise Decline(plan.hoisted[0], "a learning-rate schedule for a TF1 optimizer kept in tf.compat.v1")
        taken = _taken(module, job.block)
        estimator_params = job.estimator.get("params")
        fixed = {"model_fn": job.model_fn.name.value}
        if job.choices:
            fixed = {}  # each branch binds the model_fn and params it chose
            passed = {c.get("params").value for c, _ in job.choices if isinstance(c.get("params"), cst.Name)}
            bound_in_branches = {name for st in C.walk(job.chosen_in) if isinstance(st, cst.SimpleStatementLine)
                                 for name in C.assignment(st)[0]}
            if len(passed) == 1 and next(iter(passed)) in bound_in_branches:
                fixed["params"] = next(iter(passed))  # `params = {...}` in a branch: the others bind it too
        elif isinstance(estimator_params, cst.Name):
            fixed["params"] = estimator_params.value
        names = E.fresh_names(taken, fixed)
        params_name = names["params"]
        export_taken = taken | set(names.values())
        for serving in exports.servings():
            receiver = serving.source if serving.source.isidentifier() else ""
            serving.function_name = C.fresh(
                "serve" if len(exports.servings()) == 1 else "serve_" + receiver.removesuffix("_fn"), export_taken)
            export_taken.add(serving.function_name)

        def decline(node, why, hint=""):
            raise Decline(node, why, hint)

        def get(call, key):
            value = call.get(key) if call is not None else None
            return C.code_of(value) if value is not None else None

        config = job.config
        # input functions: the module's, the block's own defs, numpy_input_fn's
        block_defs = {st.name.value: st for st in C.body_of(job.block.body) if isinstance(st, cst.FunctionDef)} if (
            not isinstance(job.block, cst.Module)) else {}
        functions = {**finder.functions, **block_defs, **finder.functions_here}
        replaced: dict[int, cst.CSTNode] = {id(job.model_fn): plan.model_fn}
        for _, fn in job.choices:
            replaced[id(fn)] = plans[id(fn)].model_fn
        if job.chosen_in is not None:
            replaced[id(job.chosen_in)] = _choose_model_fn(job, names, "params" in plan.params)
        for node in (job.train_input, job.eval_input):
            called = node.body.func if isinstance(node, cst.Lambda) and isinstance(node.body, cst.Call) else node
            if isinstance(called, cst.Name) and called.value in functions and called.value not in finder.functions_here:
                fn = functions[called.value]
                replaced[id(fn)] = dataset_input_fn(replaced.get(id(fn), fn), self.qualname)
            elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in functions
                  and factory_input_fn(functions[node.func.value]) is not None):
                fn = functions[node.func.value]  # an input_fn factory: make_input_fn(files, batch_size)
                replaced[id(fn)] = dataset_factory(replaced.get(id(fn), fn), self.qualname)
        train_input = E.input_call(job.train_input, functions, "train", params_name, decline)
        eval_input = (E.input_call(job.eval_input, functions, "eval", params_name, decline)
                      if job.eval_input is not None else None)
        strategy = get(config, "train_distribute")
        if strategy is not None and "ParameterServerStrategy" in strategy:
            raise Decline(config.get("train_distribute"), "train_distribute=ParameterServerStrategy: the migration"
                          " picks it from TF_CONFIG's ps tasks itself", hint="drop train_distribute")
        model_dir = get(job.estimator, "model_dir") or get(config, "model_dir")
        eval_steps_node = job.eval_spec.args.get("steps") if job.eval_spec is not None else None
        if job.evaluation is not None:
            # Estimator.evaluate's steps default to None: the whole dataset
            eval_steps_node = job.evaluation.args.get("steps", cst.Name("None"))
        settings = E.Settings(
            strategy=strategy,
            params=(get(job.estimator, "params") if "params" not in fixed and job.estimator.get("params") is not None
                    else None),
            seed=get(config, "tf_random_seed"),
            model_dir=model_dir,
            save_steps=get(config, "save_checkpoints_steps"),
            save_secs=get(config, "save_checkpoints_secs"),
            keep_max=get(config, "keep_checkpoint_max"),
            log_steps=get(config, "log_step_count_steps"),
            summary_steps=get(config, "save_summary_steps"),
            max_steps=C.code_of(job.max_steps) if job.max_steps is not None else None,
            extra_steps=C.code_of(job.extra_steps) if job.extra_steps is not None else None,
            train_input=train_input,
            eval_input=eval_input,
            eval_steps=(C.code_of(eval_steps_node) if eval_steps_node is not None
                        and not (isinstance(eval_steps_node, cst.Name) and eval_steps_node.value == "None")
                        else (E.EVAL_STEPS if eval_steps_node is None else None)),
            eval_steps_given=eval_steps_node is not None,
            eval_in_loop=job.eval_spec is not None,
            start_delay=get(job.eval_spec, "start_delay_secs"),
            throttle=get(job.eval_spec, "throttle_secs"),
            model_call_args=E.model_call_args(plan.params, params_name),
            train_dataset_fn=f"lambda: {train_input}",
            summaries=plan.summaries,
            eval_name=get(job.eval_spec, "name"),
            log_tensors_every=(C.code_of(job.logging.every_n_iter) if job.logging is not None
                               else C.code_of(rename(plan.log_every, {"params": params_name}))
                               if plan.log_every is not None else None),
        )
        if job.choices:
            settings.params = None  # bound in the branches
        elif "params" in plan.params and job.estimator.get("params") is None:
            settings.params = "{}"  # the Estimator passed an empty dict
        if settings.save_steps is not None and settings.save_secs is not None:
            raise Decline(config.node, "RunConfig sets both save_checkpoints_steps and save_checkpoints_secs")
        # the optimizer's settings read the model_fn's `params`: here, the Estimator's
        hoisted = [C.code_of(rename(st, {"params": params_name})) for st in plan.hoisted]
        optimizer = C.code_of(rename(plan.optimizer, {"params": params_name}))
        several = len(exports.servings()) > 1
        if exports:
            settings.serving_code = X.serving_code(exports, names, plan.predict_signatures,
                                                   E.model_call_args(plan.params, params_name))
            settings.evaluation_exports = X.evaluation_exports(exports, names, settings.model_dir or names["model_dir"],
                                                               several)
        if predictions:
            settings.serving_code = (settings.serving_code or []) + X.prediction_code(
                names, E.model_call_args(plan.params, params_name), plan.predictions_dict)
        predict_calls = {}
        for call in job.predict_calls:
            input_fn = bind_args(call, PREDICT_ARGS)[0]["input_fn"]
            predict_calls[id(call)] = C.expr(f"{names['predict']}({E.input_call(input_fn, functions, 'infer', params_name, decline)})")
        new = E.training_code(settings, names, hoisted, optimizer, plan.metrics)
        # what the exports read in the block (exporters, raw receivers, their placeholders) goes with them
        kept_reads: set[str] = set()

        class _WithoutExports(cst.CSTTransformer):
            def leave_SimpleStatementLine(self, original, updated):
                return updated.with_changes(body=[cst.Pass()]) if id(original) in export_lines else updated

        for st in block_statements:
            if st is not job.trains and id(st) not in {id(u) for u in export_finder.used} | {
                    id(r) for r in job.removed}:
                kept_reads |= C.names_used(st.visit(_WithoutExports()))
        for st in export_finder.used:
            still = set(C.assignment(st)[0]) & kept_reads
            if still:
                raise Decline(st, f"`{min(still)}`, which the export reads, is also read by the program",
                              hint="keep it to the export, or export by hand")
        job.removed.extend(export_finder.used)
        removed = {id(st) for st in job.removed}
        statements = list(job.block.body if isinstance(job.block, cst.Module) else C.body_of(job.block.body))
        # the code takes the place of the first statement of the job
        # (after the if statement choosing the model_fn, when one does)
        after = statements.index(job.chosen_in) + 1 if job.chosen_in is not None else 0
        first = next(st for st in statements[after:] if st is job.trains or id(st) in removed)
        lines = list(first.leading_lines)
        if statements.index(first) > 0 and not any(line.comment is None for line in lines):
            lines.insert(0, cst.EmptyLine(indent=False))  # the loop is a part of its own
        new[0] = new[0].with_changes(leading_lines=lines)
        export_calls = {id(c.line): c for c in exports.calls}

        class _Exported(cst.CSTTransformer):
            def leave_SimpleStatementLine(self, original, updated):
                found = export_calls.get(id(original))
                if found is None:
                    return updated
                return updated.with_changes(body=[cst.Expr(C.expr(X.export_statement(found, names, several)))])

            def leave_Call(self, original, updated):
                return predict_calls.get(id(original), updated)

        body: list[cst.BaseStatement] = []
        for st in statements:
            if any(id(node) in export_lines or id(node) in predict_calls for node in C.walk(st)):
                body.append(st.visit(_Exported()))
            elif st is job.trains:
                body += new
            elif id(st) in replaced:
                body.append(replaced[id(st)])
            elif job.evaluation is not None and st is job.evaluation.statement:
                body.append(st.deep_replace(job.evaluation.node, C.expr(f"{names['evaluate']}()")))
            elif id(st) in job.input_defs:
                body.append(job.input_defs[id(st)])
            elif id(st) not in removed:
                body.append(st)
        # a blank line after the defs the migration wrote (numpy_input_fn's)
        defs = {id(d) for d in job.input_defs.values()}
        body = [st.with_changes(leading_lines=[cst.EmptyLine(indent=False), *st.leading_lines])
                if i and id(body[i - 1]) in defs and not isinstance(st, cst.FunctionDef)
                and not any(line.comment is None for line in st.leading_lines) else st
                for i, st in enumerate(body)]
        if not isinstance(job.block, cst.Module):
            new_block = job.block.with_changes(body=job.block.body.with_changes(body=body))
            out = module.with_changes(body=[
                new_block if st is job.block else replaced.get(id(st), st) for st in module.body])
        else:
            out = module.with_changes(body=body)
        # the serving_input_receiver_fns went into the serving functions
        out = C.drop_unreferenced(out, {serving.source for serving in exports.servings()} & set(finder.functions))
        generated = C.code_of(cst.Module(body=new))
        if "time." in generated:
            self.ctx.require_import("time")
        if "tempfile." in generated:
            self.ctx.require_import("tempfile")
        if "os." in generated:
            self.ctx.require_import("os")
        if "logging." in generated and "logging" not in taken:
            self.ctx.require_import("absl", "logging")
        self.report(job.trains, "Estimator job -> a tf.distribute training loop calling the model_fn"
                    " (ParameterServerStrategy with ps tasks in TF_CONFIG, the chief coordinating; else"
                    " MultiWorkerMirroredStrategy)" + ("; its PREDICT branch dropped (the job never predicts)"
                                                       if plan.dropped_predict else ""),
                    fixed=True, severity="info", reference=REFERENCE)
        for export in exports.calls:
            self.report(export.call, "Estimator export -> tf.saved_model.save of the model_fn's PREDICT mode on the"
                        " serving_input_receiver_fn's inputs (tf.function signatures: "
                        + ", ".join(plan.predict_signatures) + "), with the trained variables, into a new"
                        " directory named by the time under the same export directory", fixed=True,
                        severity="info", reference=REFERENCE)
        for call in job.predict_calls:
            self.report(call, "Estimator.predict -> a generator of the model_fn's PREDICT-mode predictions on the"
                        " input_fn's features, one example at a time, with the trained variables", fixed=True,
                        severity="info", reference=REFERENCE)
        for exporter in exports.exporters:
            self.report(exporter.node, f"EvalSpec {'FinalExporter' if exporter.kind == 'final' else 'LatestExporter'}"
                        " -> the same SavedModel export from the evaluation ("
                        + ("after the final one" if exporter.kind == "final" else "after each one") + "), into"
                        " <model_dir>/export/<name>", fixed=True, severity="info", reference=REFERENCE)
        for node, why in job.notes:
            self.report(node, why, fixed=True, severity="info", reference=REFERENCE)
        for call in job.shuffled:
            self.report(call, "numpy_input_fn(shuffle=True) -> Dataset.shuffle(queue_capacity): the examples are"
                        " drawn in random order as before, not in the same random order", fixed=True,
                        severity="info", reference=REFERENCE)
        return out
