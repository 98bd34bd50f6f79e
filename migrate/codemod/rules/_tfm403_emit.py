"""TFM403 emit: the strategy training loop that replaces an Estimator job.

The shape is the TF2 guides' (parameter_server_training, multi_worker_with_ctl):
the strategy from TF_CONFIG as the Estimator read it (ps tasks: asynchronous
ParameterServerStrategy, the chief coordinating; no ps: MultiWorkerMirrored;
``RunConfig(train_distribute=...)``: that strategy), the model_fn made once
under the strategy (``make_template``) and called in TRAIN mode by the step,
the input_fn's dataset per worker, the global step counting steps, checkpoints,
logging and evaluation at the RunConfig's and EvalSpec's cadence.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._tfm403_analysis import factory_input_fn

# RunConfig's and EvalSpec's defaults (TF 1.15 / tensorflow_estimator 2.15)
SAVE_CHECKPOINTS_SECS = "600"
KEEP_CHECKPOINT_MAX = "5"
LOG_STEP_COUNT_STEPS = "100"
SAVE_SUMMARY_STEPS = "100"
EVAL_STEPS = "100"
START_DELAY_SECS = "120"
THROTTLE_SECS = "600"


@dataclass
class Settings:
    """Code (expressions) of what the job's constructors set; None: not set."""

    strategy: str | None  # RunConfig(train_distribute=...)
    params: str | None
    seed: str | None
    model_dir: str | None
    save_steps: str | None
    save_secs: str | None
    keep_max: str | None
    log_steps: str | None
    summary_steps: str | None
    max_steps: str | None
    extra_steps: str | None
    train_input: str  # a call building the training dataset
    eval_input: str | None  # a call building the evaluation dataset
    eval_steps: str | None
    eval_steps_given: bool
    eval_in_loop: bool  # an EvalSpec: evaluations after checkpoints and at the end
    start_delay: str | None
    throttle: str | None
    model_call_args: str  # how the step passes mode/params to the model_fn, "{mode}" for the mode
    train_dataset_fn: str  # what the coordinator / strategy calls per worker
    # LoggingTensorHook(every_n_iter=N): the step also returns the model_fn's logged tensors
    log_tensors_every: str | None = None
    # the model_fn's tf.summary.scalar/histogram in TRAIN mode: (kind, tag code), the TRAIN mode
    # returning {tag: value} after the loss (and the logged tensors)
    summaries: list[tuple[str, str]] | None = None
    # the job's SavedModel exports: the serving functions and the export function (lines), and
    # what the evaluation exports (lines of its body, the EvalSpec's exporters)
    serving_code: list[str] | None = None
    eval_name: str | None = None  # EvalSpec(name=...): the evaluation's summaries go to eval_<name>
    evaluation_exports: list[str] | None = None


def training_code(s: Settings, names: dict[str, str], hoisted: list[str], optimizer: str,
                  metrics: dict[str, str]) -> list[cst.BaseStatement]:
    n = names
    model_args = s.model_call_args
    hooked = s.log_tensors_every is not None
    summarized = bool(s.summaries)
    # what the loop reads of a step's loss: the step returns (loss, logged, summaries) when a
    # hook logs tensors or the model_fn writes summaries (each part only when there is one)
    parts = ["loss"] + (["logged"] if hooked else []) + (["summaries"] if summarized else [])
    tupled = len(parts) > 1
    out = n["step_outputs"] if tupled else "loss"
    own_loss = f"{out}[0]" if tupled else "loss"
    fetched = f"{out}.fetch()[0]" if tupled else "loss.fetch()"
    fetched_loss = f"{fetched} if {n['coordinator']} is not None else {own_loss}"
    # an EvalSpec with the strategy read from TF_CONFIG: an evaluator task may be named
    sidecar = s.eval_in_loop and s.strategy is None and s.max_steps is not None
    lines: list[str] = []
    add = lines.append
    if s.strategy is not None:
        add(f"{n['strategy']} = {s.strategy}")
        add(f"{n['coordinator']} = None")
        add(f"{n['resolver']} = {n['strategy']}.cluster_resolver")
    else:
        add(f"{n['resolver']} = tf.distribute.cluster_resolver.TFConfigClusterResolver()")
        if sidecar:
            add(f'if {n["resolver"]}.task_type == "evaluator":')
            add("    # TF_CONFIG's evaluator task evaluates the chief's checkpoints, as the Estimator's did.")
            add(f"    {n['strategy']} = tf.distribute.get_strategy()")
            add(f"    {n['coordinator']} = None")
            add(f'elif "ps" in {n["resolver"]}.cluster_spec().jobs:')
        else:
            add(f'if "ps" in {n["resolver"]}.cluster_spec().jobs:')
        add("    # ps tasks in TF_CONFIG: asynchronous training, as the Estimator's was. The chief")
        add("    # coordinates and every worker trains; the ps and worker tasks serve until the job ends.")
        add(f'    if {n["resolver"]}.task_type in ("ps", "worker"):')
        add("        tf.distribute.Server(")
        add(f"            {n['resolver']}.cluster_spec(), job_name={n['resolver']}.task_type,")
        add(f'            task_index={n["resolver"]}.task_id, protocol={n["resolver"]}.rpc_layer or "grpc", start=True,')
        add("        ).join()")
        add(f"    {n['strategy']} = tf.distribute.ParameterServerStrategy({n['resolver']})")
        add(f"    {n['coordinator']} = tf.distribute.coordinator.ClusterCoordinator({n['strategy']})")
        add("else:")
        add("    # No ps tasks (or no cluster): every task trains, synchronously.")
        add(f"    {n['strategy']} = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver={n['resolver']})")
        add(f"    {n['coordinator']} = None")
    add(f'{n["is_chief"]} = {n["coordinator"]} is not None or {n["resolver"]}.task_type in (None, "chief")')
    if s.params is not None:
        add(f"{n['params']} = {s.params}")
    if s.seed is not None:
        add(f"tf.random.set_seed({s.seed})")
    model_dir = s.model_dir
    if model_dir is None:
        model_dir = n["model_dir"]
        add(f"{model_dir} = tempfile.mkdtemp()  # the Estimator's checkpoints went to a temporary directory too")
    add("")
    add(f"with {n['strategy']}.scope():")
    add(f'    {n["global_step"]} = tf.Variable(0, dtype=tf.int64, name="global_step", trainable=False,')
    add("        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)")
    for st in hoisted:
        add("    # The optimizer calls this schedule with its iterations, which advance once per step")
        add("    # as the global step did.")
        for line in st.rstrip("\n").split("\n"):
            add("    " + line)
    add(f"    {n['optimizer']} = {optimizer}")
    add(f'    {n["model"]} = tf.compat.v1.make_template("model", {n["model_fn"]})')
    add("    # Build the model's variables once, under the strategy, as the Estimator's graph did.")
    add(f"    {n['features']}, {n['labels']} = tf.nest.map_structure(")
    add("        lambda spec: tf.zeros([1 if d is None else d for d in spec.shape], spec.dtype),")
    add(f"        {s.train_input}.element_spec)")
    add(f"    {n['model']}({n['features']}, {n['labels']}{model_args.format(mode='train')})")
    add(f"{n['trainable_variables']} = {n['model']}.trainable_variables")
    add("")
    add("")
    add("@tf.function")
    add(f"def {n['train_step']}(iterator):")
    add("    def replica_step(features, labels):")
    add("        with tf.GradientTape() as tape:")
    add(f"            {', '.join(parts)} = {n['model']}(features, labels{model_args.format(mode='train')})")
    add("            # the strategy sums the replicas' gradients; the Estimator averaged them")
    add(f"            scaled_loss = loss / {n['strategy']}.num_replicas_in_sync")
    add(f"        gradients = tape.gradient(scaled_loss, {n['trainable_variables']})")
    add(f"        {n['optimizer']}.apply_gradients(zip(gradients, {n['trainable_variables']}))")
    add(f"        {n['global_step']}.assign_add(1)")
    if tupled:
        rest = ", ".join(parts[1:])
        add(f"        return {', '.join(parts)}")
        add(f"    losses, {rest} = {n['strategy']}.run(replica_step, args=next(iterator))")
        for part in parts[1:]:
            add("    # the tensors LoggingTensorHook logged, as this worker computed them" if part == "logged" else
                "    # the values the model_fn's summaries wrote, as this worker computed them")
            add(f"    {part} = tf.nest.map_structure(lambda value: {n['strategy']}.experimental_local_results(value)[0],"
                f" {part})")
        add(f"    return {n['strategy']}.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None), {rest}")
    else:
        add("        return loss")
        add(f"    losses = {n['strategy']}.run(replica_step, args=next(iterator))")
        add(f"    return {n['strategy']}.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)")
    add("")
    add("")
    if s.eval_input is not None and metrics:
        add("# eval_metric_ops, as Keras metrics the evaluation updates")
        add(f"{n['eval_metrics']} = {{")
        for key, metric in metrics.items():
            add(f"    {key}: {metric},")
        add("}")
        add("")
        add("")
        add("@tf.function")
        add(f"def {n['eval_step']}(features, labels):")
        add(f"    loss, metric_inputs = {n['model']}(features, labels{model_args.format(mode='eval')})")
        add("    for name, inputs in metric_inputs.items():")
        add(f"        {n['eval_metrics']}[name].update_state(*inputs)")
        add("    return loss")
        add("")
        add("")
    elif s.eval_input is not None:
        add("@tf.function")
        add(f"def {n['eval_step']}(features, labels):")
        add(f"    return {n['model']}(features, labels{model_args.format(mode='eval')})")
        add("")
        add("")
    if s.eval_input is not None:
        add(f"def {n['evaluate']}():")
        add("    # The Estimator's evaluation of the latest variables" + (", on the chief." if s.eval_in_loop else "."))
        if metrics:
            add(f"    for metric in {n['eval_metrics']}.values():")
            add("        metric.reset_state()")
        take = f".take({s.eval_steps})" if s.eval_steps is not None else ""
        add(f"    losses = [{n['eval_step']}(features, labels) for features, labels in {s.eval_input}{take}]")
        if metrics:
            add(f"    results = {{name: float(metric.result()) for name, metric in {n['eval_metrics']}.items()}}")
        else:
            add("    results = {}")
        add('    results["loss"] = float(tf.reduce_mean(losses))')
        add(f'    results["global_step"] = int({n["global_step"]}.numpy())')
        add('    logging.info("Saving dict for global step %d: %s", results["global_step"], results)')
        eval_dir = '"eval"' if s.eval_name is None else f'"eval_" + {s.eval_name}'
        add(f"    # the evaluation's summaries, where the Estimator wrote them (<model_dir>/{'eval' if s.eval_name is None else 'eval_<name>'})")
        add(f"    eval_writer = tf.summary.create_file_writer(os.path.join({s.model_dir or n['model_dir']}, {eval_dir}))")
        add('    with eval_writer.as_default(step=results["global_step"]):')
        add("        for name, value in results.items():")
        add('            if name != "global_step":')
        add("                tf.summary.scalar(name, value)")
        add("    eval_writer.close()")
        for line in s.evaluation_exports or []:
            add(line)
        add("    return results")
        add("")
        add("")
    for line in s.serving_code or []:
        add(line)
    add(f"{n['checkpoint']} = tf.train.Checkpoint(global_step={n['global_step']}, optimizer={n['optimizer']},"
        f" model={n['model']})")
    add(f"{n['manager']} = tf.train.CheckpointManager({n['checkpoint']}, {model_dir},"
        f" max_to_keep={s.keep_max or KEEP_CHECKPOINT_MAX})")
    if s.max_steps is not None:
        add(f"{n['last_step']} = {s.max_steps}")
    if sidecar:
        add(f'if {n["resolver"]}.task_type == "evaluator":')
        add(f"    for checkpoint_path in tf.train.checkpoints_iterator({model_dir},"
            f" min_interval_secs={s.throttle or THROTTLE_SECS}):")
        add(f"        {n['checkpoint']}.restore(checkpoint_path).expect_partial()")
        add(f"        {n['evaluate']}()")
        add(f"        if {n['global_step']}.numpy() >= {n['last_step']}:")
        add("            break")
        add("else:")
        outer, lines = lines, []
        add = lines.append
    add(f"if {n['coordinator']} is not None:")
    add(f"    {n['iterator']} = iter({n['coordinator']}.create_per_worker_dataset({s.train_dataset_fn}))")
    add("else:")
    add(f"    {n['iterator']} = iter({n['strategy']}.distribute_datasets_from_function(")
    add(f"        lambda input_context: {s.train_input}))")
    add(f"if {n['manager']}.latest_checkpoint:")
    add(f"    {n['checkpoint']}.restore({n['manager']}.latest_checkpoint)")
    add("# the loss summary the Estimator's chief wrote every save_summary_steps steps")
    add(f"{n['writer']} = tf.summary.create_file_writer({model_dir}) if {n['is_chief']} else"
        " tf.summary.create_noop_writer()")
    add(f"{n['step']} = int({n['global_step']}.numpy())")
    if hooked:
        add(f"{n['first_step']} = {n['step']}")
    if s.max_steps is None:
        add(f"{n['last_step']} = {n['step']} + {s.extra_steps}")
    if s.save_steps is None:
        add(f"{n['next_save']} = time.monotonic() + {s.save_secs or SAVE_CHECKPOINTS_SECS}")
    if s.eval_in_loop:
        add(f"{n['next_eval']} = time.monotonic() + {s.start_delay or START_DELAY_SECS}")
    evaluates = n["is_chief"]
    if sidecar:
        evaluates = n["chief_evaluates"]
        add("# the chief evaluates unless TF_CONFIG names an evaluator task, which then does (as the Estimator's)")
        add(f'{evaluates} = {n["is_chief"]} and "evaluator" not in {n["resolver"]}.cluster_spec().jobs')
    add(f"while {n['step']} < {n['last_step']}:")
    add(f"    if {n['coordinator']} is not None:")
    add(f"        {out} = {n['coordinator']}.schedule({n['train_step']}, args=({n['iterator']},))")
    add("    else:")
    add(f"        {out} = {n['train_step']}({n['iterator']})")
    if hooked:
        add(f"    if ({n['step']} - {n['first_step']}) % {s.log_tensors_every} == 0:")
        add("        # what the LoggingTensorHook of the TrainSpec logged, at its cadence")
        add(f"        {n['logged']} = ({out}.fetch()[1] if {n['coordinator']} is not None")
        add(f"                  else tf.nest.map_structure(lambda value: value.numpy(), {out}[1]))")
        add(f'        logging.info("%s", ", ".join(f"{{tag}} = {{value}}" for tag, value in {n["logged"]}.items()))')
    add(f"    {n['step']} += 1")
    log_steps = s.log_steps or LOG_STEP_COUNT_STEPS
    indent = "    "
    if log_steps != "1":
        add(f"    if {n['step']} % {log_steps} == 0:")
        indent = "        "
    add(indent + f'logging.info("loss = %s, step = %d", {fetched_loss}.numpy(), {n["step"]})')
    add(f"    if {n['step']} % {s.summary_steps or SAVE_SUMMARY_STEPS} == 0:")
    add(f"        with {n['writer']}.as_default(step={n['step']}):")
    add(f'            tf.summary.scalar("loss", {fetched_loss})')
    if summarized:
        index = parts.index("summaries")
        add("            # the summaries the model_fn wrote in TRAIN mode")
        add(f"            {n['summaries']} = ({out}.fetch()[{index}] if {n['coordinator']} is not None"
            f" else {out}[{index}])")
        for kind, tag in s.summaries:
            add(f"            tf.summary.{kind}({tag}, {n['summaries']}[{tag}])")
    if s.save_steps is not None:
        add(f"    if {n['step']} % {s.save_steps} == 0 and {n['step']} < {n['last_step']}:")
    else:
        add(f"    if time.monotonic() >= {n['next_save']} and {n['step']} < {n['last_step']}:")
    add(f"        if {n['coordinator']} is not None:")
    add(f"            {n['coordinator']}.join()")
    add(f"        if {n['is_chief']}:")
    add(f"            {n['manager']}.save(checkpoint_number={n['global_step']})")
    if s.save_steps is None:
        add(f"        {n['next_save']} = time.monotonic() + {s.save_secs or SAVE_CHECKPOINTS_SECS}")
    if s.eval_in_loop:
        add(f"        if {evaluates} and time.monotonic() >= {n['next_eval']}:")
        add(f"            {n['evaluate']}()")
        add(f"            {n['next_eval']} = time.monotonic() + {s.throttle or THROTTLE_SECS}")
    add(f"if {n['coordinator']} is not None:")
    add(f"    {n['coordinator']}.join()")
    add(f"if {n['is_chief']}:")
    add(f"    {n['manager']}.save(checkpoint_number={n['global_step']})")
    if s.eval_in_loop and sidecar:
        add(f"if {evaluates}:")
        add(f"    {n['evaluate']}()")
    elif s.eval_in_loop:
        add(f"    {n['evaluate']}()")
    if sidecar:
        lines = outer + ["    " + line if line else line for line in lines]
    statements = C.stmts("\n".join(lines) + "\n")
    # blank lines between the statements carry no indentation
    return [st.with_changes(leading_lines=[line.with_changes(indent=False) if line.comment is None else line
                                            for line in st.leading_lines]) for st in statements]


NAMES = (
    "strategy", "coordinator", "resolver", "is_chief", "params", "model_dir", "global_step", "optimizer", "model",
    "features", "labels", "trainable_variables", "train_step", "eval_step", "evaluate", "iterator", "checkpoint",
    "manager", "step", "last_step", "next_save", "next_eval", "eval_metrics", "writer", "first_step", "step_outputs",
    "logged", "model_fn", "export", "summaries", "predict", "predict_step", "chief_evaluates",
)
_SPELLED = {"resolver": "cluster_resolver", "manager": "checkpoint_manager", "writer": "summary_writer",
            "export": "export_saved_model"}


def fresh_names(taken: set[str], fixed: dict[str, str]) -> dict[str, str]:
    out = dict(fixed)
    taken = set(taken)
    for key in NAMES:
        if key in out:
            continue
        out[key] = C.fresh(_SPELLED.get(key, key), taken)
        taken.add(out[key])
    return out


def code(node: cst.CSTNode) -> str:
    return C.code_of(node)


def model_call_args(params: tuple[str, ...], params_name: str) -> str:
    out = ""
    if "mode" in params:
        out += ', mode="{mode}"'
    if "params" in params:
        out += f", params={params_name}"
    if "config" in params:
        out += ", config=None"  # declared, never read: the migrated job has no RunConfig
    return out


def input_call(node: cst.BaseExpression, functions: dict[str, cst.FunctionDef], mode: str, params_name: str,
               decline) -> str:
    """A call building the input_fn's dataset as the Estimator called it (params, mode)."""
    if isinstance(node, cst.Lambda):
        if node.params.params:
            decline(node, "an input_fn lambda taking parameters")
        return code(node.body)
    factory = None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in functions:
        factory = factory_input_fn(functions[node.func.value])
    if factory is not None or isinstance(node, cst.Name) and node.value in functions:
        # a factory's call makes the input_fn: make_input_fn(files, 32)(...) builds its dataset
        fn = factory if factory is not None else functions[node.value]
        args = []
        for p in fn.params.params:
            name = p.name.value
            if name == "params":
                args.append(f"params={params_name}")
            elif name == "mode":
                args.append(f'mode="{mode}"')
            elif p.default is None:
                decline(fn, f"input_fn parameter `{name}` is none the Estimator passed (params, mode)")
        return f"{code(node) if factory is not None else node.value}({', '.join(args)})"
    decline(node, "the input_fn is not a function of this module (tf.estimator.inputs.numpy_input_fn and"
            " others built by TF1 have no TF 2.21 counterpart)",
            hint="write an input_fn returning a tf.data.Dataset of (features, labels)")
    return ""
