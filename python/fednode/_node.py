"""fednode.Node: one node of a topology file, driven from Python (docs/python.md, "A node")."""
import json

from . import _fednode
from ._arrays import rows
from ._errors import UsageError

__all__ = ["Node"]


class Node:
    """Node `id` (its id or name) of the topology file `topology`, as `fednode run --topology FILE
    --id ID` runs it: the same plan, keys, state directory, wire and result.

    Its data come from the file ([federation.data]) unless `features=(X, y)` gives them: a matrix
    of this node's features (NumPy, or a torch tensor) and their labels, with `test=(Xt, yt)` to
    score its head, and `backbone_fingerprint=` naming the model they came from, the same at
    every node (the file's nodes on .npy features say `backbone_fingerprint` in [federation.data]);
    `num_classes=` the federation's class count when this node's labels do not reach the last class.

    key_dir, state_dir, metrics, discover, discover_on: as `fednode run`'s options.
    on_head(classifier)       each (new) head, as a Classifier with predict() and export().
    on_log(level, line)       the node's lines ("info", "warning", ...); quiet=True silences them.
    on_knowledge(sender, contributors)   each piece of knowledge accepted.
    Callbacks run on the thread that drives the node (the one in step() or run()).

    Constructing binds the node's address and opens its state directory; a node killed and made
    again with the same arguments continues its run.
    """

    def __init__(self, topology, id, *, features=None, test=None, backbone_fingerprint=None,
                 class_names=None, num_classes=None, key_dir=None, state_dir=None, metrics=None,
                 discover=False, discover_on=None, quiet=False, on_head=None, on_log=None,
                 on_knowledge=None):
        if test is not None and features is None:
            raise UsageError("test=(X, y) goes with features=(X, y)")
        train_X = train_y = test_X = test_y = None
        if features is not None:
            train_X, train_y = rows(features, "features")
        if test is not None:
            test_X, test_y = rows(test, "test")
        self._node = _fednode.Node(
            str(topology), str(id), str(key_dir or ""), str(state_dir or ""), str(metrics or ""),
            bool(discover), list(discover_on or []), bool(quiet), train_X, train_y, test_X, test_y,
            backbone_fingerprint or "", list(class_names or []), int(num_classes or 0), on_head, on_log,
            on_knowledge)

    def step(self, seconds=0.1):
        """One turn of the node's loop, handling what arrives within `seconds`; True once it is done
        (finished, incomplete or stopped). For programs with a loop of their own."""
        return self._node.step(seconds)

    def run(self):
        """Steps until done and returns the result (result.json's structure, docs/node.md); Ctrl-C
        stops the node, which keeps its state, and raises KeyboardInterrupt."""
        return json.loads(self._node.run())

    @property
    def result(self):
        """The result so far (status "running" until done)."""
        return json.loads(self._node.result_json())

    def classifier(self, personal=False):
        """The node's head (or personal head) as a Classifier; None before it has one."""
        return self._node.classifier(personal)

    def request_stop(self):
        """Stops the node at its next step, from any thread; it keeps its state."""
        self._node.request_stop()

    @property
    def state_dir(self):
        return self._node.state_dir
