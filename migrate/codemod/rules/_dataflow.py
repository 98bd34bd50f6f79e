"""Data flow between a device-setter block and the rest of the program, for
TFM301: which statements of the block are no graph at all (host work that
must still run once), which statements after it only choose TF1 plumbing,
how TF1 session reads outside ``run`` read the strategy's state, and which
names the rewrite would stop binding while the program still reads them
(the located reason for declining).

Analysis only: these functions return what to move, drop or say; the rule
does the rewriting."""

from __future__ import annotations

import builtins
from collections import Counter

import libcst as cst

from migrate.codemod.fastcst import node_cache
from migrate.codemod.rules import _cst as C
from migrate.codemod.rules._graph import Graph

# TensorFlow-namespaced calls that run on the host and build no graph: dataset
# readers handing out NumPy batches (TF1's MNIST tutorial reader, Keras's loaders)
HOST_CALL_PREFIXES = (
    "examples.tutorials.",
    "contrib.learn.datasets.",
    "contrib.learn.python.learn.datasets.",
    "keras.datasets.",
)


def _is_host_statement(statement, qualname) -> bool:
    """Does the statement call a host-side dataset reader, and nothing that
    could build graph ops (TensorFlow, or a function of the program's own)?"""
    reads_data = False
    for call in C.calls_in(statement):
        q = qualname(call.func)
        if q is not None:
            if not q.startswith(HOST_CALL_PREFIXES):
                return False
            reads_data = True
        elif isinstance(call.func, cst.Name) and not hasattr(builtins, call.func.value):
            return False
    return reads_data


def graph_names(graph: Graph) -> set[str]:
    """Names the block binds to graph values (tensors, variables, ops)."""
    names = set(graph.placeholder_names) | graph.compute_names | set(graph.variables) | graph.input_names
    names |= graph.dropped | set(graph.schedules)
    for name in (graph.global_step, graph.optimizer, graph.train_op, graph.grads_name, graph.grads_vars_name):
        if name:
            names.add(name)
    names |= graph.trainable_aliases
    return names


def host_statements(graph: Graph, qualname) -> list[cst.BaseStatement]:
    """Statements of the block's forward computation that build no graph (a
    dataset reader, `mnist = input_data.read_data_sets(...)`): TF1 ran them
    once while building the graph, and the loop reads their result. They are
    taken out of ``graph.compute`` (the step functions would otherwise leave
    them out, or run them every step); the ones reading nothing the block
    binds are returned, to run before the strategy is made, the others join
    the state built under its scope, after what they read."""
    bound_by_graph = graph_names(graph)
    state_bound: dict[str, int] = {}
    for k, statement in enumerate(graph.state):
        for name in C.assignment(statement)[0]:
            state_bound[name] = k
    hoisted: list[cst.BaseStatement] = []
    kept = []
    into_state: list[tuple[int, cst.BaseStatement]] = []
    for names, statement in graph.compute:
        _, value, _ = C.assignment(statement)
        if not names or value is None or not _is_host_statement(statement, qualname):
            kept.append((names, statement))
            continue
        reads = C.names_used(statement)
        if reads & (bound_by_graph - set(names)):
            kept.append((names, statement))
            continue
        after = [state_bound[n] for n in reads if n in state_bound]
        if after:
            into_state.append((max(after), statement))
        else:
            hoisted.append(statement)
    if len(kept) == len(graph.compute):
        return []
    graph.compute = kept
    for position, statement in sorted(into_state, key=lambda p: -p[0]):
        graph.state.insert(position + 1, statement)
    return hoisted


def session_state_read(call: cst.Call, qualname, sessions: set[str], graph: Graph) -> cst.BaseExpression | None:
    """`tf.train.global_step(sess, global_step)` read the step's value
    through the session, as a Python int: in TF2 the variable is read
    directly, `int(global_step.numpy())`. None for any other call."""
    if qualname(call.func) != "train.global_step":
        return None
    session = C.arg(call, 0, "sess")
    tensor = C.arg(call, 1, "global_step_tensor")
    if not (isinstance(session, cst.Name) and session.value in sessions):
        return None
    if not (isinstance(tensor, cst.Name) and tensor.value == graph.global_step):
        return None
    return C.expr(f"int({tensor.value}.numpy())")


def unbound_reads(old: list[cst.BaseStatement], new: list[cst.BaseStatement],
                  module: cst.Module) -> list[tuple[str, cst.BaseStatement]]:
    """Names the old statements bound that the new ones read but no longer
    bind (a graph tensor the loop still runs, a session used after the
    loop), each with the innermost old statement outside the graph block
    (``old[0]``) reading it: where the rewrite would leave the program
    broken. Names the module binds anywhere else too (another scope, a
    parameter) are left to the engine's scope analysis."""
    lost = bound_names(old) - bound_names(new)
    if lost:
        in_scope, in_old = _scope_counts(module, old), binding_counts(old)
        lost = {name for name in lost if in_scope[name] <= in_old[name]}
    if not lost:
        return []
    lost &= free_reads(new)
    if not lost:
        return []
    # statements the rewrite kept as they were are the same nodes in both
    kept = {id(node) for node in C.walk(cst.Module(body=old))}
    out = []
    reads: dict[int, tuple[cst.CSTNode, set[str]]] = {}  # each statement's free reads, once
    for name in sorted(lost):
        reader = next((found for st in new if (found := _innermost_reader(st, name, reads)) is not None), None)
        if reader is None or id(reader) not in kept:
            reader = next((found for st in old[1:] if (found := _innermost_reader(st, name, reads)) is not None),
                          old[0])
        out.append((name, reader))
    return out


def free_reads(statements) -> set[str]:
    """Names the statements read from their own scope: reads inside nested
    functions and lambdas count only where those do not bind the name."""
    return _union_cached(statements, _FREE_READS, _free_reads_of)


_FREE_READS: dict[int, tuple[cst.CSTNode, frozenset[str]]] = node_cache()


def _free_reads_of(node) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef:
            params = {p.name.value for p in _params(node.params)}
            out |= free_reads(list(C.body_of(node.body))) - bound_names(C.body_of(node.body)) - params
            stack.extend(d.decorator for d in node.decorators)
            continue
        if kind is cst.Lambda:
            out |= free_reads([node.body]) - {p.name.value for p in _params(node.params)}
            continue
        if kind in (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp):
            # the comprehension's own loop variables are no reads of the scope around it
            local = set()
            comp = node.for_in
            while comp is not None:
                local.update(_targets(comp.target))
                comp = comp.inner_for_in
            out |= free_reads(list(C.children(node))) - local
            continue
        if kind in (cst.AssignTarget, cst.AsName, cst.CompFor) or kind is cst.For:
            # a bound name is no read; what a target reads (`a[i] = ...`) is
            for child in C.children(node):
                if child is node.target if kind is not cst.AsName else child is node.name:
                    stack.extend(_target_reads(child))
                else:
                    stack.append(child)
            continue
        if kind is cst.Name:
            out.add(node.value)
        elif kind is cst.Attribute or kind is cst.Arg:
            stack.append(node.value)
            continue
        stack.extend(C.children(node))
    return out


def _target_reads(target) -> list[cst.CSTNode]:
    """The parts of an assignment target that are read, not bound."""
    if isinstance(target, cst.Name):
        return []
    if isinstance(target, (cst.Tuple, cst.List)):
        return [part for element in target.elements for part in _target_reads(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_reads(target.value)
    return [target]


def _params(params: cst.Parameters) -> list[cst.Param]:
    out = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            out.append(star)
    return out


def _innermost_reader(statement, name: str, reads: dict[int, tuple[cst.CSTNode, set[str]]] | None = None):
    """The innermost statement in ``statement`` reading ``name``, or None
    (``reads``: free reads of the statements seen so far, by id)."""
    if reads is None:
        reads = {}
    known = reads.get(id(statement))
    if known is None or known[0] is not statement:
        known = reads[id(statement)] = (statement, free_reads([statement]))
    if name not in known[1]:
        return None
    body = getattr(statement, "body", None)
    if isinstance(body, cst.BaseSuite) and not isinstance(statement, cst.FunctionDef):
        inner = list(C.body_of(body))
        orelse = getattr(statement, "orelse", None)
        while orelse is not None:
            inner.append(orelse) if isinstance(orelse, cst.If) else inner.extend(C.body_of(orelse.body))
            orelse = None
        for child in inner:
            found = _innermost_reader(child, name, reads)
            if found is not None:
                return found
    return statement


def _scope_counts(module: cst.Module, old) -> Counter:
    """Bindings the statements ``old`` can see: module-level names and the
    innermost function holding them (its parameters and nested scopes
    included); the whole module's when that function is not found."""
    ids = {id(node) for statement in old for node in C.walk(statement)}
    holder = None
    for node in C.walk(module):
        if type(node) is cst.FunctionDef and any(id(n) in ids for n in C.walk(node.body)):
            holder = node  # walked outer to inner: the last one holding them is innermost
    if holder is None:
        return _module_counts(module)
    counts = Counter(bound_names(module.body))
    counts.update(binding_counts([holder]))
    return counts


_MODULE_COUNTS: list[tuple[cst.Module, Counter]] = []


def _module_counts(module: cst.Module) -> Counter:
    """binding_counts of the whole module, kept for the module last asked about."""
    if not (_MODULE_COUNTS and _MODULE_COUNTS[0][0] is module):
        _MODULE_COUNTS[:] = [(module, binding_counts(module.body))]
    return _MODULE_COUNTS[0][1]


def bound_names(statements) -> set[str]:
    """Names the statements bind in their own scope (nested functions' and
    classes' bodies excluded, their names included)."""
    return _union_cached(statements, _BOUND, _bound_by)


def assigned_anywhere(statements) -> set[str]:
    """Every name the statements assign, nested scopes and comprehension
    targets included (what a loop body may change, counted generously)."""
    out: set[str] = set()
    for st in statements:
        for node in C.walk(st):
            if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
                out |= C.names_used(node.target)
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                out |= C.names_used(node.asname.name)
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                out.add(node.name.value)
            elif isinstance(node, (cst.Global, cst.Nonlocal)):
                out |= {n.name.value for n in node.names}
    return out


def _union_cached(statements, cache: dict, names_of) -> set[str]:
    """The union of ``names_of(statement)``, each statement's names found once
    (the analyses of every block ask again) and kept in ``cache`` by node."""
    out: set[str] = set()
    for statement in statements:
        found = cache.get(id(statement))
        if found is None or found[0] is not statement:
            if len(cache) >= 65536:  # (outside the engine, which empties it after each source)
                cache.clear()
            found = cache[id(statement)] = (statement, frozenset(names_of(statement)))
        out |= found[1]
    return out


_BOUND: dict[int, tuple[cst.CSTNode, frozenset[str]]] = node_cache()


def _bound_by(statement) -> set[str]:
    out: set[str] = set()
    stack = [statement]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in (cst.FunctionDef, cst.ClassDef):
            out.add(node.name.value)
            continue
        if kind is cst.Lambda or kind in (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp):
            continue
        if kind is cst.AssignTarget or kind is cst.AugAssign or kind is cst.AnnAssign:
            out.update(_targets(node.target))
        elif kind is cst.AsName:
            out.update(_targets(node.name))
        elif kind is cst.For or kind is cst.NamedExpr:
            out.update(_targets(node.target))
        elif kind is cst.ImportAlias:
            name = node.asname.name if node.asname is not None else node.name
            if isinstance(name, cst.Name):
                out.add(name.value)
            elif isinstance(name, cst.Attribute):
                out.add(C.code_of(name).split(".")[0])
        stack.extend(C.children(node))
    return out


def _targets(target) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for element in target.elements:
            out += _targets(element.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _targets(target.value)
    return []


def binding_counts(nodes) -> Counter:
    """How many times each name is bound in ``nodes``, every scope included
    (assignments, loop and `with` targets, imports, defs, parameters)."""
    counts: Counter = Counter()
    for node in C.walk(cst.Module(body=list(nodes))):
        kind = type(node)
        if kind in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr):
            counts.update(_targets(node.target))
        elif kind is cst.AsName:
            counts.update(_targets(node.name))
        elif kind in (cst.FunctionDef, cst.ClassDef, cst.Param):
            counts[node.name.value] += 1
        elif kind is cst.ImportAlias:
            name = node.asname.name if node.asname is not None else node.name
            counts[C.code_of(name).split(".")[0]] += 1
    return counts


# exports of a TF1 session's graph for serving: no step function can stand in for them
GRAPH_EXPORTS = ("contrib.session_bundle.", "saved_model.builder.", "saved_model.simple_save",
                 "saved_model.Builder", "train.export_meta_graph")


def graph_export(reader: cst.CSTNode, qualname) -> cst.Call | None:
    """The call of ``reader`` exporting a TF1 graph for serving (a session
    bundle's ``Exporter(saver)``, a ``SavedModelBuilder``), if any."""
    for call in C.calls_in(reader):
        q = qualname(call.func) or ""
        if q.startswith(GRAPH_EXPORTS):
            return call
    return None


def helper_export(reader: cst.CSTNode, module: cst.Module, qualname) -> tuple[str, cst.Call] | None:
    """(function, its export call) when ``reader`` calls a function of the
    module that exports a TF1 graph for serving (`export_model(sess, ...)`)."""
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef}
    for call in C.calls_in(reader):
        if isinstance(call.func, cst.Name) and call.func.value in functions:
            export = graph_export(functions[call.func.value].body, qualname)
            if export is not None:
                return call.func.value, export
    return None


def global_readers(module: cst.Module, names, holder_code: str = "") -> list[str]:
    """The module's functions (methods included) reading any of ``names``
    as module globals (not binding them themselves)."""
    out: list[str] = []
    for node in C.walk(module):
        if type(node) is not cst.FunctionDef:
            continue
        own = bound_names(C.body_of(node.body)) | {p.name.value for p in node.params.params}
        declared = {n.name.value for g in C.walk(node.body) if type(g) is cst.Global for n in g.names}
        if declared & set(names):
            continue  # the function publishing them
        if (set(names) - own) & C.names_used(node.body) and node.name.value not in out:
            out.append(node.name.value)
    return out


def unbound_reason(names: list[str], graph: Graph, sessions: set[str], reader: cst.CSTNode,
                   export: cst.Call | None = None, module: cst.Module | None = None,
                   exporting_helper: tuple[str, cst.Call] | None = None) -> str:
    """Why reading ``names`` in the statement ``reader`` stops the rewrite,
    in the program's terms; ``export`` is its call exporting the TF1 graph."""
    def listed(group):
        return ", ".join(f"`{n}`" for n in group)
    values = graph_names(graph)
    used_sessions = [n for n in names if n in sessions]
    runs = any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "run" for c in C.calls_in(reader))
    fed = [n for n in names if runs and n in graph.placeholder_names and n not in used_sessions]
    plumbing = [n for n in names if n in graph.dropped and n not in used_sessions]
    inputs = [n for n in names if n in graph.placeholder_names and n not in fed + used_sessions + plumbing]
    ops = [n for n in names if n in values and n not in fed + used_sessions + plumbing + inputs]
    other = [n for n in names if n not in used_sessions + fed + ops + plumbing + inputs]
    parts = []
    if used_sessions:
        parts.append(f"it uses the TF1 session {listed(used_sessions)} outside the `run` calls this rule turns into"
                     " step or evaluation functions, and TF2 has no session")
    if fed:
        parts.append(f"it feeds the placeholder(s) {listed(fed)} to a session run this rule does not migrate")
    if inputs:
        parts.append(f"it uses the placeholder(s) {listed(inputs)} of the training graph as TF1 graph value(s),"
                     " not as a feed of a session run the rule migrates, and TF2 has no placeholders")
    if ops:
        parts.append(f"it uses {listed(ops)}, built in the device-setter block, as TF1 graph value(s), not as"
                     " fetches of a session run the rule migrates, so no step or evaluation function binds them")
    if plumbing:
        parts.append(f"it uses {listed(plumbing)}, TF1 graph plumbing of the block (a Saver, a summary, queue or"
                     " initializer op) that the migration drops, having no TF2 counterpart there")
    if other:
        parts.append(f"it uses {listed(other)}, bound by TF1 session code this rule removes")
    if isinstance(reader, cst.SimpleStatementLine) and any(type(s) is cst.Global for s in reader.body):
        # `global x, y` in the block: other functions run these graph values in sessions of their own
        readers = global_readers(module, names) if module is not None else []
        elsewhere = f"`{'()`, `'.join(readers)}()`" if readers else "code elsewhere"
        parts = [(f"the block publishes {listed(names)} as module globals (`global`) for {elsewhere}, which runs"
                  " them in a TF1 session; the step functions cannot hand graph values out")]
    saves = [c for c in C.calls_in(reader) if isinstance(c.func, cst.Attribute) and c.func.attr.value in (
        "save", "restore") and isinstance(c.func.value, cst.Name) and c.func.value.value in plumbing]
    if saves and export is None:
        # a Saver used by hand: say what it does, then what it needs
        call = saves[0]
        parts.insert(0, f"it {call.func.attr.value}s a TF1 checkpoint by hand (`{C.code_of(call.func)}(...)`) with"
                     " the block's Saver, in the TF1 session; the migration checkpoints with tf.train.Checkpoint"
                     " (a CheckpointManager saving at TF1's cadence and at the end), whose files a Saver neither"
                     " writes nor reads; it maps onto it only the statements `saver.save(sess, path, global_step=step)`"
                     " and `saver.restore(sess, path)` of a Saver of all the variables bound once in this function")
    if exporting_helper is not None and export is None:
        helper, call = exporting_helper
        parts.insert(0, f"it hands the trained graph to `{helper}()`, which exports it for serving"
                     f" (`{C.code_of(call.func)}(...)`) in a TF1 session; TFM301 carries over such an export"
                     " (a session bundle, a SavedModelBuilder, simple_save) written in the function that trains, after"
                     " its loop, not one in a function it calls")
    if export is not None:
        # what the statement does comes first: the names are what that export needs
        parts.insert(0, f"it exports the trained TF1 graph for serving (`{C.code_of(export.func)}(...)`), which"
                     " needs the TF1 session, its graph and Saver; TF2 has none of them, and this rule writes no"
                     " serving export (tf.saved_model.save of a tf.Module with a signature is its TF2 counterpart)")
    return "training not migrated: " + "; ".join(parts)


def placeholder_from_helper(inner: list[cst.BaseStatement], module: cst.Module, qualname):
    """`y_conv, keep_prob = deepnn(x)` where the module function `deepnn`
    creates `keep_prob = tf.placeholder(...)` itself and returns it (TF1's
    deep MNIST tutorial): the placeholder is made in the graph block instead
    and passed to the helper as a parameter, so it becomes an argument of the
    step like the block's own placeholders. Only for a helper called once,
    with plain parameters, returning a tuple of names. Returns (the block's
    new statements, {helper's code: migrated helper}), or None."""
    functions = {st.name.value: st for st in module.body if type(st) is cst.FunctionDef}
    if not functions:
        return None
    for k, statement in enumerate(inner):
        names, value, assign = C.assignment(statement)
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in functions):
            continue
        target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        if not isinstance(target, (cst.Tuple, cst.List)) or len(names) != len(target.elements):
            continue
        helper = functions[value.func.value]
        plan = _helper_placeholder(helper, len(names), qualname)
        if plan is None or any(isinstance(a.value, cst.StarredElement) or a.star or a.keyword for a in value.args):
            continue
        calls = sum(1 for c in C.calls_in(module) if isinstance(c.func, cst.Name) and c.func.value == helper.name.value)
        if calls != 1:
            continue
        index, placeholder_statement, new_helper = plan
        program_name = names[index]
        kept = [el.value for j, el in enumerate(target.elements) if j != index]
        new_target = kept[0] if len(kept) == 1 else cst.Tuple([cst.Element(v) for v in kept])
        new_call = value.with_changes(args=[*value.args, cst.Arg(cst.Name(program_name))]) if not value.args else \
            value.with_changes(args=[*value.args[:-1], value.args[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(cst.Name(program_name))])
        placeholder_call = C.assignment(placeholder_statement)[1]
        made = C.stmt(f"{program_name} = {C.code_of(placeholder_call)}\n").with_changes(
            leading_lines=statement.leading_lines)
        called = statement.with_changes(body=[statement.body[0].with_changes(
            targets=[cst.AssignTarget(new_target)], value=new_call)], leading_lines=[])
        return inner[:k] + [made, called] + inner[k + 1:], {C.code_of(helper): new_helper}
    return None


def _helper_placeholder(helper: cst.FunctionDef, arity: int, qualname):
    """(index in the returned tuple, the placeholder statement, the helper
    taking it as its last parameter) for a helper whose body makes one
    placeholder at its top level (or in a `with tf.name_scope(...):` there)
    and returns it among ``arity`` values."""
    params = helper.params
    if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None or (
            params.kwonly_params or params.posonly_params or any(p.default is not None for p in params.params)):
        return None
    body = list(C.body_of(helper.body))
    if not body or not isinstance(body[-1], cst.SimpleStatementLine) or type(body[-1].body[0]) is not cst.Return:
        return None
    returned = body[-1].body[0].value
    if not isinstance(returned, (cst.Tuple, cst.List)) or len(returned.elements) != arity or any(
            isinstance(el, cst.StarredElement) for el in returned.elements):
        return None
    returned_names = [el.value.value if isinstance(el.value, cst.Name) else None for el in returned.elements]

    def makes_returned(st) -> bool:
        names, value, _ = C.assignment(st)
        return (len(names) == 1 and isinstance(value, cst.Call) and names[0] in returned_names
                and (qualname(value.func) or "").split(".")[-1] == "placeholder")

    # at the top level, or in a `with tf.name_scope(...):` of it (which named the op only)
    made = [(j, None, st) for j, st in enumerate(body) if makes_returned(st)]
    for j, st in enumerate(body):
        if isinstance(st, cst.With) and all(
                isinstance(i.item, cst.Call) and (qualname(i.item.func) or "").split(".")[-1] == "name_scope"
                and i.asname is None for i in st.items):
            made += [(j, k, inner) for k, inner in enumerate(C.body_of(st.body)) if makes_returned(inner)]
    if len(made) != 1:
        return None
    position, nested, statement = made[0]
    name = C.assignment(statement)[0][0]
    holder = body[position]
    rest_of_holder = [] if nested is None else [st for k, st in enumerate(C.body_of(holder.body)) if k != nested]
    if any(name in bound_names([st]) for j, st in enumerate(body) if j != position) or any(
            name in bound_names([st]) for st in rest_of_holder):
        return None
    index = returned_names.index(name)
    rest = [el.value for j, el in enumerate(returned.elements) if j != index]
    new_return = body[-1].with_changes(body=[body[-1].body[0].with_changes(
        value=rest[0] if len(rest) == 1 else cst.Tuple([cst.Element(v) for v in rest], lpar=[], rpar=[]))])
    if nested is not None:
        # the name scope keeps the rest of its statements (the comment above the placeholder with them)
        if not rest_of_holder:
            return None
        if nested < len(rest_of_holder) and statement.leading_lines:
            following = rest_of_holder[nested]
            rest_of_holder[nested] = following.with_changes(
                leading_lines=[*statement.leading_lines, *following.leading_lines])
        new_body = [*body[:position], holder.with_changes(body=C.indented(rest_of_holder, holder.body)),
                    *body[position + 1:-1], new_return]
    else:
        new_body = [st for j, st in enumerate(body) if j != position][:-1] + [new_return]
    if nested is None and position < len(body) - 1 and statement.leading_lines:
        following = new_body[position]
        new_body[position] = following.with_changes(
            leading_lines=[*statement.leading_lines, *following.leading_lines])
    new_params = params.with_changes(params=[*params.params, cst.Param(cst.Name(name))])
    if params.params:
        last = params.params[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        new_params = params.with_changes(params=[*params.params[:-1], last, cst.Param(cst.Name(name))])
    return index, statement, helper.with_changes(params=new_params, body=helper.body.with_changes(body=new_body))


def fed_literal(name: str, fetches) -> str | None:
    """The number fed to the placeholder ``name`` by the session runs (the
    first one found; every feed must be a number literal), else None: a
    value the model can be built with, as the TF1 program ran it."""
    found = None
    for fetch in fetches:
        feed = fetch.feed
        if not isinstance(feed, cst.Dict):
            continue
        for element in feed.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.Name) and element.key.value == name:
                if not isinstance(element.value, (cst.Float, cst.Integer)):
                    return None
                found = found or C.code_of(element.value)
    return found


def unfed_placeholders(feed, params: list[str], graph: Graph) -> list[str]:
    """The placeholders among a step's ``params`` that a literal feed dict
    leaves out (TF1 raised "You must feed a value for placeholder" there)."""
    if not isinstance(feed, cst.Dict):
        return []
    fed = {el.key.value for el in feed.elements if isinstance(el, cst.DictElement) and isinstance(el.key, cst.Name)}
    if any(not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.Name) for el in feed.elements):
        return []
    plain = {name for name, _, call in graph.placeholders
             if C.code_of(call.func).rsplit(".", 1)[-1] == "placeholder"}  # no default to fall back on
    return [p for p in params if p in plain and p not in fed]


def queue_makers(module: cst.Module, qualname, queue_classes) -> set[str]:
    """Module functions returning a TF queue, or queues made by such
    functions (`create_done_queues()` returning `[create_done_queue(i) ...]`)."""
    returns: dict[str, list[cst.BaseExpression]] = {}
    for node in C.walk(module):
        if type(node) is cst.FunctionDef:
            returns[node.name.value] = [r.value for r in C.walk(node.body) if type(r) is cst.Return and r.value]
    makers: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in returns.items():
            if name in makers:
                continue
            if any(qualname(c.func) in queue_classes or (isinstance(c.func, cst.Name) and c.func.value in makers)
                   for value in values for c in C.calls_in(value)):
                makers.add(name)
                changed = True
    return makers


def done_signals(statements, makers: set[str]) -> tuple[set[int], set[str]]:
    """The statements building TF1's "done" signals to the ps tasks, which
    TF2 has no use for (a ParameterServerStrategy's ps serve until the job
    ends; MultiWorkerMirrored has none): `for q in create_done_queues():`
    whose body only enqueues (`op = q.enqueue(1)`, `ops.append(op)`), and
    the `ops = []` list it fills. Returns (ids of those statements, the
    names they bind, the lists included)."""
    dropped: set[int] = set()
    names: set[str] = set()
    lists: set[str] = set()
    for statement in statements:
        if not (isinstance(statement, cst.For) and isinstance(statement.target, cst.Name)
                and isinstance(statement.iter, cst.Call) and isinstance(statement.iter.func, cst.Name)
                and statement.iter.func.value in makers and statement.orelse is None):
            continue
        queue = statement.target.value
        ops: set[str] = set()
        filled: set[str] = set()
        for inner in C.body_of(statement.body):
            bound, value, _ = C.assignment(inner)
            lone = C.single_expr(inner)
            call = value if value is not None else lone
            if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
                break
            owner, method = call.func.value, call.func.attr.value
            if isinstance(owner, cst.Name) and owner.value == queue and method in ("enqueue", "enqueue_many"):
                ops.update(bound)
            elif (lone is not None and method == "append" and isinstance(owner, cst.Name) and len(call.args) == 1
                  and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value in ops):
                filled.add(owner.value)
            else:
                break
        else:
            dropped.add(id(statement))
            names |= {queue} | ops | filled
            lists |= filled
    for statement in statements:
        bound, value, _ = C.assignment(statement)
        if len(bound) == 1 and bound[0] in lists and isinstance(value, cst.List) and not value.elements:
            dropped.add(id(statement))
        for loop in C.walk(statement):
            # `for op in enq_ops: sess.run(op)`: its op is a signal too (the session stage drops the loop)
            if type(loop) is cst.For and runs_dropped_ops(loop, lists, None):
                names.add(loop.target.value)
    return dropped, names


def runs_dropped_ops(loop: cst.For, dropped: set[str], sessions: set[str] | None) -> bool:
    """`for op in enq_ops: sess.run(op)` over a dropped list of signal ops
    (``sessions`` None: whatever runs them)."""
    if not (isinstance(loop.iter, cst.Name) and loop.iter.value in dropped and isinstance(loop.target, cst.Name)):
        return False
    for inner in C.body_of(loop.body):
        call = C.single_expr(inner)
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "run"
                and isinstance(call.func.value, cst.Name) and (sessions is None or call.func.value.value in sessions)
                and len(call.args) == 1 and isinstance(call.args[0].value, cst.Name)
                and call.args[0].value.value == loop.target.value):
            return False
    return True


def drop_unused_functions(module: cst.Module, candidates: set[str]) -> cst.Module:
    """Remove the module-level functions among ``candidates`` nothing reads
    any more (the ps "done" queue makers once their signals are gone), and
    then those only they read."""
    while True:
        read: set[str] = set()
        for statement in module.body:
            if type(statement) is cst.FunctionDef and statement.name.value in candidates:
                read |= free_reads([statement]) - {statement.name.value}
            else:
                read |= free_reads([statement])
        unused = [st for st in module.body if type(st) is cst.FunctionDef and st.name.value in candidates
                  and st.name.value not in read]
        if not unused:
            return module
        gone = {id(st) for st in unused}
        module = module.with_changes(body=[st for st in module.body if id(st) not in gone])


def only_written_as_summary(target, statements, writes: set[str]) -> bool:
    """Is ``target`` (the name a session run's result is bound to) read only
    as an argument of summary writes (`writer.add_summary(summary, step)`,
    `sv.summary_computed(sess, summary)`) in the statements?"""
    if not isinstance(target, cst.Name):
        return False
    name = target.value
    inside_writes = 0
    for statement in statements:
        for call in C.calls_in(statement):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in writes:
                inside_writes += sum(1 for a in call.args if isinstance(a.value, cst.Name) and a.value.value == name)
    reads = sum(1 for statement in statements for node in C.walk(statement)
                if type(node) is cst.Name and node.value == name)
    bindings = binding_counts(statements)[name]
    return inside_writes > 0 and reads == inside_writes + bindings


def first_feed_of(name: str, statements) -> cst.CSTNode | None:
    """The first statement feeding ``name`` (a `{name: value}` feed entry)."""
    for statement in statements:
        for node in C.walk(statement):
            if type(node) is cst.DictElement and isinstance(node.key, cst.Name) and node.key.value == name:
                return _innermost_reader(statement, name) or statement
    return None


def binding_statement(name: str, nearby, module: cst.Module) -> cst.SimpleStatementLine | None:
    """The statement binding ``name``: in ``nearby`` statements first (the
    block's own scope), else at the module's top level."""
    for statements in (nearby, list(module.body)):
        for statement in statements:
            for node in C.walk(statement):
                if type(node) is cst.SimpleStatementLine and name in bound_names([node]):
                    return node
    return None


def binding_code(name: str, nearby, module: cst.Module) -> str | None:
    """The code of the statement binding ``name`` (binding_statement), on
    one line, shortened."""
    node = binding_statement(name, nearby, module)
    if node is None:
        return None
    code = " ".join("; ".join(C.code_of(small) for small in node.body).split())
    return code if len(code) <= 80 else code[:77] + "..."
