"""A job config's `model.graph` (docs/models.md) as a torch.nn.Module: an
interpreter of the same GraphConfig JSON that psflow's GraphDefinition runs,
written from the documented semantics with PyTorch's own operators, so that
parity_check.py can compare the two on the same weights and batches.

What it mirrors of psflow (model/graph/graph_spec.cc, node_kernels.cc,
graph_model.cc, model/layers/):

- Values are per example, batch first. Nodes run in psflow's order: the
  depth-first post-order over `nodes` that graph_spec.cc's Order() takes
  (each node after the nodes it reads, config order otherwise), which is
  also the order of the variables.
- Variables are "<node>/<variable>" with psflow's layouts: Dense kernel
  [in, units] (y = x kernel + bias), Cross kernel [d, d] or kernel_u
  [d, r] and kernel_v [r, d] (y = x0 * (x kernel + bias) + x), then bias;
  BatchNormalization gamma, beta (when scale, center), moving_mean and
  moving_variance (not trainable).
- BatchNormalization in training normalizes with the batch's mean and
  biased variance over every axis but the last, and those statistics are
  what psflow pushes as the moving statistics' "gradients" (recorded here
  in `batch_stats`); in inference it uses the moving statistics.
- Categorical inputs pool their field's rows of their table (sum, or mean;
  an empty bag gives zeros); inputs naming one table share it.
- DotInteraction: Z = X X^T of the F stacked fields, the output its upper
  triangle row by row (i < j, or i <= j with self_interaction).
- FactorizationMachine: 0.5 * sum_k ((sum_f x_fk)^2 - sum_f x_fk^2), [1].

Layers the zoo does not use and that cannot be mirrored exactly are refused
(Conv2D and pooling are not written here; Dropout with a rate > 0 draws
masks psflow's seed does not give).

Debian's python3-torch 1.13 (CPU). No psflow code is imported.
"""
import re

import torch
import torch.nn.functional as F


def snake(key):
    """A proto3 JSON field name in either spelling: selfInteraction ->
    self_interaction (psflow prints lowerCamelCase, configs use either)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def normalized(message):
    """`message` (a dict from JSON) with snake_case keys, recursively; the
    layer class keys (Dense, DotInteraction, ...) are kept as written."""
    if isinstance(message, dict):
        return {(k if k[:1].isupper() else snake(k)): normalized(v)
                for k, v in message.items()}
    if isinstance(message, list):
        return [normalized(v) for v in message]
    return message


def layer_class(layer):
    classes = [k for k in layer if k != "name"]
    if len(classes) != 1:
        raise ValueError("layer %r names no single class" % (layer,))
    return classes[0], layer[classes[0]]


def psflow_order(nodes, node_names):
    """graph_spec.cc's Order(): depth-first post-order from each node in
    config order, reads visited in their order."""
    done, order = set(), []

    def visit(n):
        stack = [(n, 0)]
        while stack:
            m, k = stack.pop()
            reads = [node_names[r] for r in nodes[m]["inputs"]
                     if r in node_names]
            if k < len(reads):
                stack.append((m, k + 1))
                if reads[k] not in done:
                    stack.append((reads[k], 0))
            elif m not in done:
                done.add(m)
                order.append(m)

    for n in range(len(nodes)):
        if n not in done:
            visit(n)
    return order


def activate(x, name):
    name = (name or "linear").lower()
    if name == "linear":
        return x
    if name == "relu":
        return torch.relu(x)
    if name == "tanh":
        return torch.tanh(x)
    if name == "sigmoid":
        return torch.sigmoid(x)
    raise ValueError("activation %r is not one psflow has" % name)


def reshape_target(target, size):
    target = list(target)
    if -1 in target:
        known = 1
        for t in target:
            if t != -1:
                known *= t
        target[target.index(-1)] = size // known
    return target


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class GraphTwin(torch.nn.Module):
    """`graph` (GraphConfig as a dict) for examples of `example_shape`
    with `num_fields` categorical fields; each table holds `table_rows`
    rows (an int for all, or a dict by table name); `sparse` gives the
    tables sparse gradients (for optimizers over large tables). Parameters
    start at zero: load_values() sets them."""

    def __init__(self, graph, example_shape, num_fields=0, num_classes=2,
                 table_rows=0, dtype=torch.float32, sparse=False):
        super().__init__()
        graph = normalized(graph)
        self.dtype = dtype
        self.sparse = sparse  # tables' gradients as sparse tensors
        self.num_fields = num_fields
        self.num_classes = num_classes
        self.loss = graph["output"].get("loss", "LOSS_UNSPECIFIED")
        self.output = graph["output"]["node"]
        self.shapes = {}  # value name -> per-example shape
        self.inputs = []  # (name, field, table, pooling); features: field None
        self.table_dims = {}  # first-use order, as psflow's tables()
        for spec in graph["inputs"]:
            name = spec["name"]
            if "features" in spec:
                self.inputs.append((name, None, None, None))
                self.shapes[name] = list(example_shape)
                continue
            cat = spec["categorical"]
            table = cat.get("table") or name
            dim = int(cat["dim"])
            if self.table_dims.setdefault(table, dim) != dim:
                raise ValueError("table %s read with dims %d and %d" %
                                 (table, self.table_dims[table], dim))
            self.inputs.append((name, int(cat.get("field", 0)), table,
                                cat.get("pooling") or "sum"))
            self.shapes[name] = [dim]
        self.tables = torch.nn.ParameterDict()
        for table, dim in self.table_dims.items():
            rows = table_rows[table] if isinstance(table_rows, dict) \
                else table_rows
            self.tables[table] = torch.nn.Parameter(
                torch.zeros(rows, dim, dtype=dtype))
        nodes = graph["nodes"]
        names = {n["name"]: k for k, n in enumerate(nodes)}
        self.nodes = []  # (name, class, settings, inputs), psflow's order
        self.variables = []  # (name, shape, trainable, momentum)
        self.params = torch.nn.ParameterDict()
        self.moving = {}  # name -> tensor (not trained)
        for k in psflow_order(nodes, names):
            node = nodes[k]
            cls, settings = layer_class(node["layer"])
            settings = settings or {}
            self.nodes.append((node["name"], cls, settings, node["inputs"]))
            self._infer(node["name"], cls, settings,
                        [self.shapes[i] for i in node["inputs"]])
        self.batch_stats = {}

    # ---------------------------------------------------- shapes, variables

    def _variable(self, node, suffix, shape, trainable=True, momentum=0.0):
        name = "%s/%s" % (node, suffix)
        self.variables.append((name, list(shape), trainable, momentum))
        value = torch.zeros(shape, dtype=self.dtype)
        if trainable:
            self.params[name] = torch.nn.Parameter(value)
        else:
            self.moving[name] = value

    def _infer(self, name, cls, s, shapes):
        first = shapes[0]
        if cls == "Dense":
            if len(first) != 1:
                raise ValueError("%s: Dense takes [d], got %s" % (name, first))
            units = int(s["units"])  # int64: a string in proto3 JSON
            self._variable(name, "kernel", [first[0], units])
            if s.get("use_bias", True):
                self._variable(name, "bias", [units])
            out = [units]
        elif cls == "BatchNormalization":
            c = [first[-1]]
            if s.get("scale", True):
                self._variable(name, "gamma", c)
            if s.get("center", True):
                self._variable(name, "beta", c)
            momentum = s.get("momentum", 0.99)
            self._variable(name, "moving_mean", c, False, momentum)
            self._variable(name, "moving_variance", c, False, momentum)
            out = first
        elif cls in ("Activation", "ReLU", "Rescaling", "Dropout", "Add",
                     "Multiply"):
            if cls == "Dropout" and s.get("rate", 0) > 0:
                raise ValueError("%s: Dropout rate %s: its masks cannot be "
                                 "mirrored" % (name, s["rate"]))
            out = first
        elif cls == "Flatten":
            out = [numel(first)]
        elif cls == "Reshape":
            out = reshape_target([int(t) for t in s["target_shape"]],
                                 numel(first))
        elif cls == "Concatenate":
            axis = s.get("axis", -1) % len(first)
            out = list(first)
            out[axis] = sum(sh[axis] for sh in shapes)
        elif cls in ("DotInteraction", "FactorizationMachine"):
            f = len(shapes) if len(shapes) > 1 else first[0]
            if cls == "FactorizationMachine":
                out = [1]
            elif s.get("self_interaction", False):
                out = [f * (f + 1) // 2]
            else:
                out = [f * (f - 1) // 2]
        elif cls == "Cross":
            d = first[0]
            r = int(s.get("projection_dim", 0))
            if r == 0:
                self._variable(name, "kernel", [d, d])
            else:
                self._variable(name, "kernel_u", [d, r])
                self._variable(name, "kernel_v", [r, d])
            if s.get("use_bias", True):
                self._variable(name, "bias", [d])
            out = [d]
        else:
            raise ValueError("%s: layer %s is not mirrored by the twin" %
                             (name, cls))
        self.shapes[name] = list(out)

    # ---------------------------------------------------------- values

    def value(self, name):
        return self.params[name] if name in self.params else self.moving[name]

    def load_values(self, values, rows):
        """values: variable name -> array; rows: table name -> array."""
        with torch.no_grad():
            for name, shape, trainable, _ in self.variables:
                v = torch.as_tensor(values[name], dtype=self.dtype)
                v = v.reshape(shape).clone()
                if trainable:
                    self.params[name].copy_(v)
                else:
                    self.moving[name] = v
            for table in self.tables:
                self.tables[table].copy_(torch.as_tensor(
                    rows[table], dtype=self.dtype).reshape(
                        self.tables[table].shape))

    # --------------------------------------------------------- forward

    def forward(self, features, ids, offsets, training):
        """Logits [batch, out] for `features` [batch, *example_shape] and
        the batch's bags as psflow's SparseBatch lays them out: example i's
        field f holds the table rows ids[offsets[i * F + f] .. offsets[i * F
        + f + 1]) (offsets has batch * F + 1 entries). Training records
        BatchNormalization's statistics in batch_stats."""
        self.batch_stats = {}
        x = {}
        pooled = {}  # (table, pooling) -> F values [batch, dim]
        batch = features.shape[0]
        for name, field, table, pooling in self.inputs:
            if field is None:
                x[name] = features.to(self.dtype)
                continue
            # One lookup per table and pooling for every field's bags (the
            # zoo's inputs read all fields of a table alike), not one per
            # field: what an efficient PyTorch model does.
            # unbind: one backward (a stack) for all fields, where
            # indexing each field would fill a zero gradient per field.
            key = (table, pooling)
            if key not in pooled:
                pooled[key] = F.embedding_bag(
                    ids, self.tables[table], offsets, mode=pooling,
                    sparse=self.sparse, include_last_offset=True).view(
                        batch, self.num_fields, -1).unbind(1)
            x[name] = pooled[key][field]
        for name, cls, s, reads in self.nodes:
            x[name] = self._apply(name, cls, s, [x[r] for r in reads],
                                  training)
        return x[self.output]

    def _apply(self, name, cls, s, xs, training):
        v = lambda suffix: self.value("%s/%s" % (name, suffix))  # noqa: E731
        first = xs[0]
        if cls == "Dense":
            if s.get("use_bias", True):
                y = torch.addmm(v("bias"), first, v("kernel"))
            else:
                y = first @ v("kernel")
            return activate(y, s.get("activation"))
        if cls == "Activation":
            return activate(first, s.get("activation"))
        if cls == "ReLU":
            return torch.relu(first)
        if cls == "Rescaling":
            return first * s["scale"] + s.get("offset", 0.0)
        if cls == "Dropout":
            return first
        if cls == "BatchNormalization":
            return self._batch_norm(name, s, first, training, v)
        if cls == "Flatten":
            return first.reshape(first.shape[0], -1)
        if cls == "Reshape":
            return first.reshape([first.shape[0]] +
                                 self.shapes[name])
        if cls == "Concatenate":
            axis = s.get("axis", -1)
            return torch.cat(xs, dim=axis if axis < 0 else axis + 1)
        if cls == "Add":
            return sum(xs[1:], xs[0])
        if cls == "Multiply":
            y = xs[0]
            for t in xs[1:]:
                y = y * t
            return y
        if cls == "DotInteraction":
            return self._dot_interaction(s, xs)
        if cls == "FactorizationMachine":
            stacked = torch.stack(xs, dim=1) if len(xs) > 1 else first
            total = stacked.sum(dim=1)
            return 0.5 * (total * total - (stacked * stacked).sum(dim=1)
                          ).sum(dim=1, keepdim=True)
        if cls == "Cross":
            x0, x = xs[0], xs[-1]
            if int(s.get("projection_dim", 0)):
                u = (x @ v("kernel_u")) @ v("kernel_v")
            else:
                u = x @ v("kernel")
            if s.get("use_bias", True):
                u = u + v("bias")
            return x0 * u + x
        raise ValueError("%s: layer %s is not mirrored" % (name, cls))

    def _batch_norm(self, name, s, x, training, v):
        eps = s.get("epsilon", 1e-3)
        axes = tuple(range(x.dim() - 1))
        if training:
            mean = x.mean(dim=axes)
            var = ((x - mean) ** 2).mean(dim=axes)
            self.batch_stats[name + "/moving_mean"] = mean.detach()
            self.batch_stats[name + "/moving_variance"] = var.detach()
        else:
            mean = v("moving_mean")
            var = v("moving_variance")
        y = (x - mean) / torch.sqrt(var + eps)
        if s.get("scale", True):
            y = y * v("gamma")
        if s.get("center", True):
            y = y + v("beta")
        return y

    def _dot_interaction(self, s, xs):
        stacked = torch.stack(xs, dim=1) if len(xs) > 1 else xs[0]
        z = stacked @ stacked.transpose(1, 2)  # [batch, F, F]
        f = z.shape[1]
        self_interaction = s.get("self_interaction", False)
        rows, cols = [], []
        for i in range(f):
            for j in range(i if self_interaction else i + 1, f):
                rows.append(i)
                cols.append(j)
        return z[:, rows, cols]

    def loss_of(self, logits, labels):
        """Mean loss over the batch, as psflow's TrainStep divides it."""
        if self.loss == "SIGMOID_CROSS_ENTROPY":
            return F.binary_cross_entropy_with_logits(
                logits.reshape(-1), labels.to(logits.dtype))
        return F.cross_entropy(logits, labels.long())

    def probabilities(self, logits):
        if self.loss == "SIGMOID_CROSS_ENTROPY":
            return torch.sigmoid(logits.reshape(-1))
        return torch.softmax(logits, dim=1)
