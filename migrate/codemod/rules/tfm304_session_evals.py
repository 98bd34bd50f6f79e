"""TFM304 session-evals: ``tensor.eval(feed)`` / ``op.run(feed)`` on a known
session become that session's ``run`` calls, so TFM301 sees every use of the
session it migrates."""

from __future__ import annotations

import libcst as cst

from migrate.codemod.engine import Invalid, Rule, Valid
from migrate.codemod.fastcst import transform
from migrate.codemod.rules import _cst as C

_INTERACTIVE = ("InteractiveSession",)
# what makes a TF1 session: `with X.as_default():` is a session's default scope only
# for an X bound to one of these (a graph's or a summary writer's as_default is not)
_SESSION_MAKERS = ("Session", "InteractiveSession", "MonitoredTrainingSession", "MonitoredSession",
                   "SingularMonitoredSession")
_SESSION_METHODS = ("managed_session", "prepare_or_wait_for_session")
# what reads the default session: an `as_default()` block in which nothing does
# (after its evals became runs) is not needed
_DEFAULT_READERS = ("eval", "run", "get_default_session")


def _keywords(call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """The call's keyword arguments, None when it has ``*args``/``**kwargs``."""
    out: dict[str, cst.BaseExpression] = {}
    for a in call.args:
        if a.star:
            return None
        if a.keyword is not None:
            out[a.keyword.value] = a.value
    return out


def _fed_value(call: cst.Call, method: str) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None] | None:
    """(feed, session) of ``x.eval(...)`` / ``x.run(...)`` spelled as Tensor.eval
    and Operation.run are, None for any other call of that name. ``op.run`` is
    only taken with a keyword (``feed_dict=`` or ``session=``): a bare ``.run()``
    is too common a method name elsewhere (threads, servers)."""
    keywords = _keywords(call)
    if keywords is None or set(keywords) - {"feed_dict", "session"}:
        return None
    positional = [a.value for a in call.args if a.keyword is None]
    if len(positional) > (1 if method == "eval" else 0) or (positional and "feed_dict" in keywords):
        return None
    if method == "run" and not keywords:
        return None
    feed = positional[0] if positional else keywords.get("feed_dict")
    return feed, keywords.get("session")


def _session_run(session: str, fetch: cst.BaseExpression, feed: cst.BaseExpression | None) -> cst.Call:
    args = [cst.Arg(fetch)]
    if feed is not None:
        args.append(cst.Arg(feed, keyword=cst.Name("feed_dict"), equal=C.expr("f(a=b)").args[0].equal))
    return cst.Call(func=cst.Attribute(value=cst.Name(session), attr=cst.Name("run")), args=args)


class SessionEvals(Rule):
    """What it does
    Rewrites ``tensor.eval(feed_dict)``, ``tensor.eval(session=sess, ...)`` and
    ``op.run(feed_dict=..., session=sess)`` into ``sess.run(tensor, feed_dict=...)``
    where the session is known: named by ``session=``, made the default by an
    enclosing ``with sess.as_default():`` (which goes once nothing in it needs
    a default session), or the only ``InteractiveSession`` of the module.

    Why
    TFM301 turns a session's ``run`` calls into step and evaluation functions;
    a value read with ``accuracy.eval(...)`` inside the training loop was
    invisible to it, and it declined the training ("uses `accuracy` ... as TF1
    graph value(s)").

    Example
        with sess.as_default():
            print(accuracy.eval({x: test_x, y: test_y}))
    becomes
        print(sess.run(accuracy, feed_dict={x: test_x, y: test_y}))

    Fix safety
    Safe: ``Tensor.eval(feed_dict, session)`` and ``Operation.run(feed_dict,
    session)`` are defined in TF1 as ``session.run(self, feed_dict)`` on the
    given or default session. Only calls whose session is certain are
    rewritten (a keyword ``session=``, an enclosing ``as_default()`` of a named
    session, a module with exactly one ``InteractiveSession``); ``.run`` is
    taken only with a ``feed_dict=``/``session=`` keyword. The engine keeps
    this rewrite only when TFM301 migrates the training it prepares.
    """

    code = "TFM304"
    name = "session-evals"
    triggers = (".eval(", ".run(")

    VALID = (
        # a summary writer's (or a graph's) as_default() is not a session's
        Valid(
            """
            import tensorflow as tf

            def log(writer, loss, step):
                with writer.as_default():
                    tf.summary.scalar("loss", loss, step=step)
            """
        ),
        # no session is known: left alone
        Valid(
            """
            import tensorflow as tf

            def report(accuracy, feed):
                return accuracy.eval(feed)
            """
        ),
        # Python's eval and a thread's run are not TF calls
        Valid(
            """
            import threading

            value = eval("1 + 1")
            threading.Thread(target=print).run()
            """
        ),
    )

    INVALID = (
        # a function of the module reads the default session: the `with` stays for it
        Invalid(
            """
            import tensorflow as tf

            def show(tensor):
                print(tensor.eval())

            def report(sess, accuracy, x, batch):
                with sess.as_default():
                    print(accuracy.eval({x: batch}))
                    show(accuracy)
            """,
            expected="""
            import tensorflow as tf

            def show(tensor):
                print(tensor.eval())

            def report(sess, accuracy, x, batch):
                with sess.as_default():
                    print(sess.run(accuracy, feed_dict={x: batch}))
                    show(accuracy)
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            def train(sess, train_op, accuracy, x, batches):
                for batch in batches:
                    sess.run(train_op, feed_dict={x: batch})
                    with sess.as_default():
                        print(accuracy.eval({x: batch}))
            """,
            expected="""
            import tensorflow as tf

            def train(sess, train_op, accuracy, x, batches):
                for batch in batches:
                    sess.run(train_op, feed_dict={x: batch})
                    print(sess.run(accuracy, feed_dict={x: batch}))
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            def evaluate(session, accuracy, step, feed):
                value = accuracy.eval(session=session, feed_dict=feed)
                train_step.run(feed_dict=feed, session=session)
                return value, step.eval(session=session)
            """,
            expected="""
            import tensorflow as tf

            def evaluate(session, accuracy, step, feed):
                value = session.run(accuracy, feed_dict=feed)
                session.run(train_step, feed_dict=feed)
                return value, session.run(step)
            """,
        ),
        Invalid(
            """
            import tensorflow as tf

            sess = tf.InteractiveSession()
            for batch in batches:
                train_step.run(feed_dict={x: batch})
                if step % 100 == 0:
                    print(accuracy.eval(feed_dict={x: batch}))
            """,
            expected="""
            import tensorflow as tf

            sess = tf.InteractiveSession()
            for batch in batches:
                sess.run(train_step, feed_dict={x: batch})
                if step % 100 == 0:
                    print(sess.run(accuracy, feed_dict={x: batch}))
            """,
        ),
    )

    def transform(self, module: cst.Module) -> cst.Module:
        # Nothing to rewrite without an `as_default()` (no default session, no block to
        # unwrap) or an eval/run call of the shape `leave_Call` rewrites: most TF1 scripts
        # have neither, and the analyses below walk the whole module.
        methods = [c for c in C.calls_in(module) if isinstance(c.func, cst.Attribute)]
        if not any(c.func.attr.value == "as_default" for c in methods) and not any(
                c.func.attr.value in ("eval", "run") and _fed_value(c, c.func.attr.value) is not None
                for c in methods):
            return module
        interactive = [
            targets[0]
            for statement in C.walk(module)
            if isinstance(statement, cst.SimpleStatementLine)
            for targets, value, _ in [C.assignment(statement)]
            if len(targets) == 1 and isinstance(value, cst.Call)
            and (self.qualname(value.func) or "").endswith(_INTERACTIVE)
        ]
        self.interactive = interactive[0] if len(interactive) == 1 else None
        self.sessions = self._session_names(module)
        self.defaults: list[str] = []  # sessions of the enclosing `with S.as_default():`
        self.reading_functions = {
            f.name.value for f in C.walk(module) if isinstance(f, cst.FunctionDef)
            and any(isinstance(c.func, (cst.Attribute, cst.Name))
                    and (c.func.attr.value if isinstance(c.func, cst.Attribute) else c.func.value) in _DEFAULT_READERS
                    for c in C.calls_in(f))
        }
        # (the engine's walk: libcst's visit rebuilt the whole module, changed or not)
        return transform(module, self)

    def _makes_session(self, value: cst.BaseExpression | None) -> bool:
        if not isinstance(value, cst.Call):
            return False
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in _SESSION_METHODS:
            return True
        return (self.qualname(value.func) or "").rsplit(".", 1)[-1] in _SESSION_MAKERS

    def _session_names(self, module: cst.Module) -> set[str]:
        """Names bound to a TF1 session (``sess = tf.Session()``, ``with sv.managed_session() as
        sess``) and parameters named as sessions are (``sess``, ``session``, ``mon_sess``)."""
        names = set()
        for node in C.walk(module):
            if isinstance(node, cst.Assign) and self._makes_session(node.value):
                for target in node.targets:
                    names.update(C.target_names(target.target))
            elif isinstance(node, cst.WithItem) and node.asname is not None and self._makes_session(node.item):
                names.update(C.target_names(node.asname.name))
            elif isinstance(node, cst.Param) and "sess" in node.name.value:
                names.add(node.name.value)
        return names

    def _as_default(self, node: cst.With) -> str | None:
        if len(node.items) != 1 or node.items[0].asname is not None:
            return None
        call = node.items[0].item
        if (
            isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "as_default" and isinstance(call.func.value, cst.Name)
            and call.func.value.value in self.sessions
        ):
            return call.func.value.value
        return None

    def visit_With(self, node: cst.With) -> None:
        session = self._as_default(node)
        if session is not None:
            self.defaults.append(session)

    def leave_With(self, original: cst.With, updated: cst.With):
        if self._as_default(original) is None:
            return updated
        session = self.defaults.pop()
        if not isinstance(updated.body, cst.IndentedBlock) or not self._needs_no_default(updated.body, session):
            return updated
        # nothing in the block needs a default session any more
        body = list(updated.body.body)
        body[0] = body[0].with_changes(leading_lines=[*original.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)

    def _needs_no_default(self, body: cst.BaseSuite, session: str) -> bool:
        """Nothing in ``body`` reads the default session: no call of ``eval``,
        ``run`` (but the session's own) or ``get_default_session``, and no call
        of a function of this module that makes one."""
        for call in C.calls_in(body):
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if name == "run" and isinstance(func, cst.Attribute) and C.code_of(func.value) == session:
                continue
            if name in _DEFAULT_READERS or name in self.reading_functions:
                return False
        return True

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = updated.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("eval", "run"):
            return updated
        fed = _fed_value(updated, func.attr.value)
        if fed is None:
            return updated
        feed, session = fed
        if isinstance(session, cst.Name):
            name = session.value
        elif session is not None:
            return updated
        elif self.defaults:
            name = self.defaults[-1]
        elif self.interactive is not None:
            name = self.interactive
        else:
            return updated
        if name in C.names_used(func.value):
            return updated  # `sess.run(...)` itself, or a value read through the session
        return _session_run(name, func.value, feed)
