"""Tensorforce 0.4 networks (tensorforce-client's network files) in Tensorforce 0.6 terms, with their meaning.

0.4 and 0.6 share most layer names but not their defaults: a 0.4 ``dense`` layer without ``activation``
was a ReLU layer (0.6: tanh), a 0.4 ``embedding`` was a plain lookup (0.6 adds a bias and tanh), and some
spellings changed (``internal_lstm`` is 0.6's ``lstm``, ``embedding.indices`` is ``num_embeddings``,
``padding: "VALID"`` is ``"valid"``, ``pool2d.pooling_type`` is ``reduction``, ``nonlinearity`` is
``activation``). Every layer is rewritten with 0.6's spelling and every 0.4 default written out, so the
network means what it meant; each change is reported through ``note(field, message)``. A layer with no
0.6 equivalent (``dueling``, ``tf_layer``, a residual ``skip``) is refused with a SpecProblem naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlcloud.errors import SpecError, SpecProblem

__all__ = ["LEGACY_LAYER_HINTS", "LEGACY_LAYER_MARKERS", "convert_legacy_network", "looks_like_legacy_network"]

Note = Callable[[str, str], None]

# 0.4 activation names -> 0.6 (tensorforce/core/layers/misc.py Activation accepts these).
_ACTIVATIONS_06 = frozenset(
    [
        "crelu",
        "elu",
        "leaky-relu",
        "none",
        "relu",
        "selu",
        "sigmoid",
        "softmax",
        "softplus",
        "softsign",
        "swish",
        "tanh",
    ]
)
_ACTIVATION_RENAMES = {"lrelu": "leaky-relu", "leaky_relu": "leaky-relu"}

# Layer types or keys only 0.4 used: a network holding one is a 0.4 network even outside a tfc experiment.
LEGACY_LAYER_MARKERS = frozenset(["internal_lstm", "nonlinearity", "dueling", "tf_layer", "input", "output"])
#: What a 0.4 layer type is called in 0.6, for validation messages about a 0.6 spec that uses the old name.
LEGACY_LAYER_HINTS = {
    "internal_lstm": "Tensorforce 0.4's internal_lstm is 0.6's lstm (with a horizon)",
    "nonlinearity": "Tensorforce 0.4's nonlinearity is 0.6's activation (nonlinearity: NAME)",
    "dueling": "Tensorforce 0.4's dueling layer has no 0.6 equivalent (use agent type dueling_dqn)",
    "tf_layer": "Tensorforce 0.4's tf_layer has no 0.6 equivalent (0.6 has keras layers: {type: keras, layer: ...})",
    "input": "Tensorforce 0.4's input layer is 0.6's retrieve",
    "output": "Tensorforce 0.4's output layer is 0.6's register",
}
_LEGACY_KEYS = frozenset(["indices", "pooling_type", "skip", "weights", "l1_regularization", "named_tensors"])

# Keys of 0.4 layers that only named TensorFlow scopes or summaries: dropped with a note.
_BOOKKEEPING = ("scope", "summary_labels", "named_tensors")


def looks_like_legacy_network(network: Any) -> bool:
    """True when ``network`` uses a spelling only Tensorforce 0.4 had (see LEGACY_LAYER_MARKERS)."""
    for layer in _layers(network):
        if layer.get("type") in LEGACY_LAYER_MARKERS or _LEGACY_KEYS & set(layer):
            return True
        padding = layer.get("padding")
        if isinstance(padding, str) and padding != padding.lower():
            return True
    return False


def _layers(network: Any) -> list[dict[str, Any]]:
    if isinstance(network, dict) and isinstance(network.get("layers"), list):
        network = network["layers"]
    if not isinstance(network, list):
        return []
    found: list[dict[str, Any]] = []
    for layer in network:
        if isinstance(layer, list):
            found += _layers(layer)
        elif isinstance(layer, dict):
            found.append(layer)
    return found


def convert_legacy_network(network: Any, field: str, note: Note) -> Any:
    """The 0.6 network for a 0.4 one (a layer list, or ``{type: layered, layers: [...]}``).

    Raises SpecError naming every layer that has no 0.6 equivalent.
    """
    problems: list[SpecProblem] = []
    out: dict[str, Any] | list[Any]
    if isinstance(network, dict) and isinstance(network.get("layers"), list):
        out = dict(network)
        out["layers"] = _convert_list(network["layers"], f"{field}.layers", note, problems)
    elif isinstance(network, list):
        out = _convert_list(network, field, note, problems)
    else:
        return network  # "auto", a 0.6 network dict or something the model check reports
    if problems:
        raise SpecError(problems)
    return out


def _convert_list(layers: list[Any], field: str, note: Note, problems: list[SpecProblem]) -> list[Any]:
    out: list[Any] = []
    for i, layer in enumerate(layers):
        where = f"{field}[{i}]"
        if isinstance(layer, list):
            out.append(_convert_list(layer, where, note, problems))
        elif isinstance(layer, dict):
            out.append(_convert_layer(layer, where, note, problems))
        else:
            out.append(layer)
    return out


def _activation(value: Any, where: str, problems: list[SpecProblem]) -> Any:
    if value is None:
        return "none"
    if isinstance(value, str):
        value = _ACTIVATION_RENAMES.get(value, value)
        if value in _ACTIVATIONS_06:
            return value
    problems.append(
        SpecProblem(
            f"{where}.activation", f"no Tensorforce 0.6 activation; one of {', '.join(sorted(_ACTIVATIONS_06))}", value
        )
    )
    return value


def _convert_layer(layer: dict[str, Any], where: str, note: Note, problems: list[SpecProblem]) -> dict[str, Any]:
    """One 0.4 layer in 0.6 terms (0.4 defaults: tensorforce/core/networks/layer.py of 0.4.0)."""
    out = dict(layer)
    type_ = out.get("type")
    changes: list[str] = []
    _convert_common_keys(out, where, changes, problems)
    convert = _LAYER_CONVERTERS.get(type_) if isinstance(type_, str) else None
    if convert is not None:
        convert(out, where, changes, problems)
    if "activation" in out and out.get("type") not in ("activation",):
        activation = _activation(out["activation"], where, problems)
        if activation != out["activation"]:
            changes.append(f"activation {out['activation']!r} became {activation!r}")
            out["activation"] = activation
    if changes:
        note(where, f"{where} ({type_}): " + "; ".join(changes))
    return out


def _convert_common_keys(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    """The keys any 0.4 layer may have: bookkeeping dropped, ``trainable`` and ``padding`` respelled, fixed
    weights, L1 regularization and skip connections refused."""
    padding = out.get("padding")
    for key in _BOOKKEEPING:
        if key in out:
            out.pop(key)
            changes.append(f"{key} dropped (TensorFlow 1 scope/summary naming)")
    if "weights" in out:
        problems.append(
            SpecProblem(f"{where}.weights", "0.4's fixed initial weights have no Tensorforce 0.6 equivalent; remove it")
        )
    if out.get("l1_regularization"):
        problems.append(
            SpecProblem(
                f"{where}.l1_regularization",
                "Tensorforce 0.6 layers have l2_regularization only",
                out["l1_regularization"],
            )
        )
    out.pop("l1_regularization", None)
    if "trainable" in out:
        out["vars_trainable"] = out.pop("trainable")
        changes.append("trainable became vars_trainable")
    if out.get("skip"):
        problems.append(
            SpecProblem(f"{where}.skip", "0.4's residual skip connection has no Tensorforce 0.6 equivalent")
        )
    out.pop("skip", None)
    if isinstance(padding, str) and padding != padding.lower():
        out["padding"] = padding.lower()
        changes.append(f"padding {padding!r} became {out['padding']!r}")


_Converter = Callable[[dict[str, Any], str, list[str], list[SpecProblem]], None]


def _dense(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    if "activation" not in out:
        # 0.4's dense default was ReLU; 0.6's is tanh: write the old default out
        out["activation"] = "relu"
        changes.append("activation relu written out (0.4's dense default; 0.6's is tanh)")
    if "size" not in out or out["size"] is None:
        problems.append(SpecProblem(f"{where}.size", "required in Tensorforce 0.6 (0.4 kept the input size)"))


def _conv(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    out.setdefault("activation", "relu")  # the same default in both versions: explicit for readability


def _pool2d(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    if "pooling_type" in out:
        pooling = out.pop("pooling_type")
        reduction = {"avg": "average"}.get(pooling, pooling)
        out["reduction"] = reduction
        changes.append(f"pooling_type became reduction: {reduction}")
    else:
        out["reduction"] = "max"  # 0.4's default; 0.6 requires it
        changes.append("reduction: max written out (0.4's default; required in 0.6)")


def _embedding(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    if "indices" in out:
        out["num_embeddings"] = out.pop("indices")
        changes.append("indices became num_embeddings")
    # a 0.4 embedding was a plain table lookup; 0.6 adds a bias and tanh unless told not to
    out.setdefault("bias", False)
    out.setdefault("activation", "none")
    changes.append("bias: false, activation: none written out (0.4's embedding was a plain lookup)")


def _internal_lstm(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    out["type"] = "lstm"
    # 0.4 carried the LSTM state through the episode; 0.6 recomputes it over a fixed horizon
    horizon = out.pop("horizon", 10)
    out["horizon"] = horizon
    out.setdefault("bias", False)
    out.setdefault("activation", "none")
    changes.append(
        f"internal_lstm became lstm with horizon {horizon} (0.4 kept the state over the whole episode; 0.6 "
        "recomputes it over the last `horizon` timesteps: set horizon to taste), bias: false, activation: none"
    )
    out.pop("lstm_params", None)


def _lstm(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    # 0.4's `lstm` ran over the input sequence axis: 0.6's input_lstm; 0.6's `lstm` is the internal one
    out["type"] = "input_lstm"
    out.setdefault("bias", False)
    out.setdefault("activation", "none")
    changes.append("lstm (over the input sequence) became input_lstm, bias: false, activation: none")
    out.pop("lstm_params", None)


def _nonlinearity(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    name = out.pop("name", "relu")
    for extra in ("alpha", "beta"):
        if out.pop(extra, None) not in (None, 1.0):
            problems.append(SpecProblem(f"{where}.{extra}", "0.6's activation layer has no alpha/beta scaling"))
    out["type"] = "activation"
    out["nonlinearity"] = _activation(name, where, problems)
    changes.append(f"nonlinearity became activation: {out['nonlinearity']}")


def _input(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    out["type"] = "retrieve"
    out["tensors"] = out.pop("names", None)
    if "aggregation_type" in out:
        out["aggregation"] = out.pop("aggregation_type")
    # 0.4 counted the batch axis (default 1), 0.6 does not (default 0)
    out["axis"] = int(out.pop("axis", 1)) - 1
    changes.append("input became retrieve (axis counted without the batch axis)")


def _output(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    out["type"] = "register"
    out["tensor"] = out.pop("name", None)
    changes.append("output became register")


def _refused(out: dict[str, Any], where: str, changes: list[str], problems: list[SpecProblem]) -> None:
    type_ = out["type"]
    problems.append(SpecProblem(f"{where}.type", f"0.4's {type_} layer has no Tensorforce 0.6 equivalent", type_))


#: What changes in each 0.4 layer type beyond the keys every layer may have (other types: nothing).
_LAYER_CONVERTERS: dict[str, _Converter] = {
    "dense": _dense,
    "conv1d": _conv,
    "conv2d": _conv,
    "pool2d": _pool2d,
    "embedding": _embedding,
    "internal_lstm": _internal_lstm,
    "lstm": _lstm,
    "nonlinearity": _nonlinearity,
    "input": _input,
    "output": _output,
    "dueling": _refused,
    "tf_layer": _refused,
}
