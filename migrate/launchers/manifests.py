"""YAML launch configurations: Kubeflow TFJobs, plain Kubernetes manifests
and docker-compose files, edited round trip (ruamel.yaml keeps comments,
key order and quoting) to the topology the migrated program needs.

- TFJob (``kubeflow.org/v1``, ``v1alpha2``: ``spec.tfReplicaSpecs``): a
  ``Chief`` replica spec made from the ``Worker`` one (``replicas: 1``) for
  ParameterServerStrategy; the ``PS`` spec removed for
  MultiWorkerMirroredStrategy. ``Evaluator`` specs are kept as they are.
- Kubernetes Jobs/Pods/StatefulSets/Deployments (one per task) whose
  container runs the program and sets TF_CONFIG or passes role flags: a chief
  task made from worker 0 (its Service too), every task's TF_CONFIG cluster
  (or ``--chief_hosts``) naming it; for MultiWorkerMirroredStrategy the ps
  tasks and their Services go and the clusters lose their ``ps``.
- docker-compose services, the same way.
"""

from __future__ import annotations

import copy
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from migrate.launchers import commands
from migrate.launchers.topology import Topology

YAML_SUFFIXES = (".yaml", ".yml")


class LauncherError(Exception):
    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line, self.column = line, column


@dataclass
class Edit:
    """What a launcher rewrite did (``fixed``) or leaves to do by hand, located in the input."""

    code: str
    message: str
    line: int = 1
    column: int = 1
    fixed: bool = True


@dataclass
class Rewrite:
    text: str
    edits: list[Edit] = field(default_factory=list)


def _yaml(text: str) -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    mapping, sequence, offset = _indents(text)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def _indents(text: str) -> tuple[int, int, int]:
    """The file's own indentation of mappings and of sequences under a key."""
    lines = text.splitlines()
    mapping = None
    offset = 0
    for at, line in enumerate(lines[:-1]):
        key = re.match(r"^(\s*)[^\s#-][^:]*:\s*(#.*)?$", line)
        if not key:
            continue
        following = lines[at + 1]
        item = re.match(r"^(\s*)- ", following)
        if item:
            offset = max(0, len(item.group(1)) - len(key.group(1)))
            break
        nested = re.match(r"^(\s*)\S", following)
        if nested and mapping is None and len(nested.group(1)) > len(key.group(1)):
            mapping = len(nested.group(1)) - len(key.group(1))
    mapping = mapping or 2
    return mapping, offset + 2, offset


def load(text: str) -> list:
    try:
        return [doc for doc in _yaml(text).load_all(text)]
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise LauncherError(f"YAML error: {e.problem or e.context}", mark.line + 1 if mark else None,
                            mark.column + 1 if mark else None) from None
    except YAMLError as e:
        raise LauncherError(f"YAML error: {e}") from None


def dump(docs: list, like: str) -> str:
    stream = io.StringIO()
    yaml = _yaml(like)
    yaml.explicit_start = like.lstrip().startswith("---")
    yaml.dump_all(docs, stream)
    return stream.getvalue()


def _line(node, key=None) -> int:
    try:
        if key is not None and isinstance(node, CommentedMap):
            return node.lc.key(key)[0] + 1
        return node.lc.line + 1
    except (AttributeError, KeyError, TypeError):
        return 1


# --------------------------------------------------------------------------- containers


@dataclass
class _Task:
    """A container that runs the program: where its role and cluster are written."""

    container: CommentedMap
    owner: CommentedMap  # the document or compose service holding it
    job: str | None
    index: str | None
    config: dict | None  # its TF_CONFIG
    set_config: Callable[[dict], None] | None


def _command(container) -> list[str]:
    tokens: list[str] = []
    for key in ("command", "args", "entrypoint"):
        value = container.get(key)
        if isinstance(value, str):
            tokens += value.split()
        elif isinstance(value, list):
            tokens += [str(v) for v in value]
    return tokens


def _env_config(container) -> tuple[dict | None, Callable[[dict], None] | None]:
    env = container.get("env") or container.get("environment")
    if isinstance(env, list):
        for at, item in enumerate(env):
            if isinstance(item, dict) and item.get("name") == "TF_CONFIG":
                config = commands.tf_config(item.get("value"))
                if config is not None:
                    return config, lambda c, item=item: _set(item, "value", json.dumps(c))
            elif isinstance(item, str) and item.startswith("TF_CONFIG="):
                config = commands.tf_config(item.split("=", 1)[1])
                if config is not None:
                    return config, lambda c, env=env, at=at: env.__setitem__(at, "TF_CONFIG=" + json.dumps(c))
    elif isinstance(env, dict) and "TF_CONFIG" in env:
        config = commands.tf_config(env["TF_CONFIG"])
        if config is not None:
            return config, lambda c, env=env: _set(env, "TF_CONFIG", json.dumps(c))
    return None, None


def _set(mapping, key, value: str) -> None:
    old = mapping[key]
    mapping[key] = type(old)(value) if isinstance(old, str) and type(old) is not str else value


def _containers(node, program: str, owner=None):
    """Every container mapping under ``node`` whose command runs ``program``."""
    if isinstance(node, dict):
        if ("command" in node or "args" in node or "entrypoint" in node) and \
                commands.runs_program(_command(node), program) is not None:
            yield node, owner
        for value in node.values():
            yield from _containers(value, program, owner)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value, program, owner)


def _task(container, owner) -> _Task:
    config, set_config = _env_config(container)
    if config is not None:
        job, index = commands.tf_config_role(config)
    else:
        job, index = commands.role(_command(container))
    return _Task(container, owner, job, index, config, set_config)


def _set_role_flags(container, job: str, index: str) -> None:
    for key in ("args", "command"):
        value = container.get(key)
        if isinstance(value, list) and commands.role([str(v) for v in value]) != (None, None):
            new = commands.with_role([str(v) for v in value], job, index)
            value[:] = new
            return
        if isinstance(value, str) and commands.role(value.split()) != (None, None):
            container[key] = " ".join(commands.with_role(value.split(), job, index))
            return


def _add_flag(container, name: str, value: str) -> None:
    for key in ("args", "command"):
        tokens = container.get(key)
        if isinstance(tokens, list) and commands.role([str(v) for v in tokens]) != (None, None):
            tokens[:] = commands.with_flag([str(v) for v in tokens], name, value)
            return
        if isinstance(tokens, str) and commands.role(tokens.split()) != (None, None):
            container[key] = " ".join(commands.with_flag(tokens.split(), name, value))
            return


def _flag_hosts(tasks: list[_Task], name: str) -> list[str]:
    for task in tasks:
        found = commands.flag(_command(task.container), name)
        if found:
            return found[2].split(",")
    return []


_NAME_KEYS = ("hostname", "container_name", "serviceName", "subdomain")
_LABEL_MAPS = ("labels", "selector", "matchLabels")


def _renamed(node, old: str, new: str):
    """A deep copy of ``node`` with ``old`` made ``new`` in its object names,
    hostnames and labels (not in commands, images or environment)."""
    node = copy.deepcopy(node)

    def walk(value):
        if isinstance(value, dict):
            for key in list(value):
                item = value[key]
                if isinstance(item, str) and key in _NAME_KEYS:
                    value[key] = re.sub(old, new, item)
                elif isinstance(item, dict) and key == "metadata" and isinstance(item.get("name"), str):
                    item["name"] = re.sub(old, new, item["name"])
                    walk(item)
                elif isinstance(item, dict) and key in _LABEL_MAPS:
                    for label in list(item):
                        if isinstance(item[label], str):
                            item[label] = re.sub(old, new, item[label])
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(node)
    return node


# --------------------------------------------------------------------------- TFJob


def _tfjob(doc, topology: Topology, edits: list[Edit]) -> bool:
    spec = doc.get("spec") or {}
    replicas = spec.get("tfReplicaSpecs")
    if not isinstance(replicas, CommentedMap):
        if isinstance(spec.get("replicaSpecs"), list):
            edits.append(Edit("TFM501", "TFJob v1alpha1 (`replicaSpecs`) left as is: move it to kubeflow.org/v1"
                              f" `tfReplicaSpecs`; {topology.describe()}", _line(spec, "replicaSpecs"), fixed=False))
        return False
    roles = {str(k).lower(): k for k in replicas}
    changed = False
    if topology.needs_chief and "chief" not in roles and "master" not in roles:
        worker = replicas.get(roles.get("worker"))
        if not isinstance(worker, CommentedMap):
            edits.append(Edit("TFM501", f"TFJob has no Worker replica spec to make the Chief from; {topology.describe()}",
                              _line(replicas), fixed=False))
            return False
        chief = copy.deepcopy(worker)
        chief.ca.items.pop("replicas", None)  # a comment about the workers' count
        chief["replicas"] = 1
        for container, _ in _containers(chief, topology.program.name):
            if commands.role(_command(container)) != (None, None):
                _set_role_flags(container, "chief", "0")
        replicas.insert(0, "Chief", chief)
        edits.append(Edit("TFM501", "TFJob: added a Chief replica spec (1 replica, from the Worker spec): "
                          + topology.describe(), _line(replicas, roles["worker"])))
        changed = True
    if topology.drops_ps and "ps" in roles:
        line = _line(replicas, roles["ps"])
        del replicas[roles["ps"]]
        edits.append(Edit("TFM501", "TFJob: removed the PS replica spec: " + topology.describe(), line))
        changed = True
    return changed


# --------------------------------------------------------------------------- tasks: k8s objects, compose services


def _tasks_topology(tasks: list[_Task], insert_after: Callable[[_Task, object], None],
                    remove: Callable[[_Task], None], topology: Topology, code: str, edits: list[Edit],
                    copy_owner: Callable[[_Task], object], where: Callable[[_Task], int]) -> bool:
    roles = {t.job for t in tasks}
    changed = False
    if topology.needs_chief and not roles & {"chief", "master"}:
        worker0 = next((t for t in tasks if t.job == "worker" and t.index in ("0", None)), None)
        if worker0 is None:
            edits.append(Edit(code, "no worker 0 task to make the chief task from; " + topology.describe(),
                              fixed=False))
            return False
        if worker0.config is not None:
            addresses = [a for hosts in worker0.config["cluster"].values() for a in hosts]
            worker_hosts = worker0.config["cluster"].get("worker") or []
        else:
            worker_hosts = _flag_hosts(tasks, ("worker_hosts", "worker-hosts"))
            addresses = worker_hosts + _flag_hosts(tasks, ("ps_hosts", "ps-hosts"))
        if not worker_hosts:
            edits.append(Edit(code, "cannot tell the workers' addresses (no TF_CONFIG cluster or --worker_hosts);"
                              " " + topology.describe(), where(worker0), fixed=False))
            return False
        chief = commands.chief_address(worker_hosts[0], addresses)
        for task in tasks:
            _add_chief(task, chief, topology)
        new_owner = copy_owner(worker0)
        for container, owner in _containers(new_owner, topology.program.name, new_owner):
            new = _task(container, owner)
            if new.config is not None:
                new.config["task"] = {"type": "chief", "index": 0}
                new.set_config(new.config)
            else:
                _set_role_flags(container, "chief", "0")
        insert_after(worker0, new_owner)
        edits.append(Edit(code, f"added a chief task ({chief}) made from worker 0, and named it in every task's"
                          f" cluster: {topology.describe()}", where(worker0)))
        changed = True
    if topology.drops_ps:
        for task in [t for t in tasks if t.job == "ps"]:
            edits.append(Edit(code, "removed this ps task: " + topology.describe(), where(task)))
            remove(task)
            changed = True
        for task in tasks:
            if task.job != "ps" and task.config is not None and "ps" in task.config["cluster"]:
                del task.config["cluster"]["ps"]
                task.set_config(task.config)
                changed = True
    return changed


def _add_chief(task: _Task, chief: str, topology: Topology) -> None:
    if task.config is not None:
        cluster = task.config["cluster"]
        task.config["cluster"] = {"chief": [chief], **{k: v for k, v in cluster.items() if k != "chief"}}
        task.set_config(task.config)
    elif topology.chief_flag:
        _add_flag(task.container, "chief_hosts", chief)


def _kube_tasks(docs: list, program: str) -> list[_Task]:
    return [_task(container, doc) for doc in docs if isinstance(doc, dict) and doc.get("kind") != "TFJob"
            for container, _ in _containers(doc, program, doc)]


def _compose_tasks(services, program: str) -> list[_Task]:
    return [_task(container, service) for service in services.values()
            for container, _ in _containers(service, program, service)]


def rewrite_yaml(text: str, topology: Topology) -> Rewrite | None:
    """The rewrite of a YAML launcher of ``topology.program``, or None when
    the file does not launch it."""
    docs = load(text)
    program = topology.program.name
    edits: list[Edit] = []
    changed = False
    tfjobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == "TFJob"
              and any(True for _ in _containers(d, program))]
    for doc in tfjobs:
        changed |= _tfjob(doc, topology, edits)
    compose = next((d for d in docs if isinstance(d, dict) and isinstance(d.get("services"), dict)), None)
    if compose is not None:
        services = compose["services"]
        tasks = _compose_tasks(services, program)
        if tasks:
            def key_of(owner):
                return next(k for k, v in services.items() if v is owner)

            def insert_after(worker0, new):
                key = key_of(worker0.owner)
                position = list(services).index(key) + 1
                services.insert(position, re.sub("(?i)worker", "chief", key) if "worker" in key.lower()
                                else "chief", new)

            def remove(task):
                key = key_of(task.owner)
                del services[key]
                for service in services.values():
                    depends = service.get("depends_on") if isinstance(service, dict) else None
                    if isinstance(depends, list) and key in depends:
                        depends.remove(key)
                    elif isinstance(depends, dict) and key in depends:
                        del depends[key]

            changed |= _tasks_topology(tasks, insert_after, remove, topology, "TFM505", edits,
                                       lambda t: _renamed(t.owner, "(?i)worker", "chief"),
                                       lambda t: _line(services, key_of(t.owner)))
    tasks = _kube_tasks(docs, program)
    if tasks:
        def insert_after(worker0, new):
            at = docs.index(worker0.owner) + 1
            docs.insert(at, new)
            for service in _services_of(docs, worker0.owner):
                docs.insert(at + 1, _renamed(service, "(?i)worker", "chief"))

        def remove(task):
            for service in _services_of(docs, task.owner):
                docs.remove(service)
            docs.remove(task.owner)

        changed |= _tasks_topology(tasks, insert_after, remove, topology, "TFM502", edits,
                                   lambda t: _renamed(t.owner, "(?i)worker", "chief"), lambda t: _line(t.owner))
    if not tfjobs and compose is None and not tasks:
        return None
    return Rewrite(dump(docs, text) if changed else text, edits)


def _services_of(docs: list, owner) -> list:
    """The Services selecting ``owner``'s pods (by labels) or named like it."""
    name = str((owner.get("metadata") or {}).get("name", ""))
    labels = _pod_labels(owner)
    found = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Service":
            continue
        selector = (doc.get("spec") or {}).get("selector") or {}
        if (selector and labels and all(labels.get(k) == v for k, v in selector.items())
                and _distinguishes(selector, labels)) or (doc.get("metadata") or {}).get("name") == name:
            found.append(doc)
    return found


def _pod_labels(owner) -> dict:
    template = (owner.get("spec") or {}).get("template") or {}
    return dict(((template.get("metadata") or {}).get("labels")) or ((owner.get("metadata") or {}).get("labels"))
                or {})


def _distinguishes(selector, labels) -> bool:
    """A selector naming this task's own labels (a role or an index), not only the job's."""
    return any(re.search(r"(?i)worker|ps|chief|\d", str(v)) for v in selector.values())


