"""A runtime's own copy of a model's modules: the same parameters, other linear layers.

A runtime computes a trained model another way (prepacked or int8 linear layers, a compiled
step) without changing the model: it runs a *network*, a copy of the model's module tree that
shares every parameter and buffer with it (nothing is copied but the module objects), in
which each `nn.Linear` is held by a runtime layer (`aiayn.runtime.prepacked`,
`aiayn.runtime.int8`). The model keeps its modules, their attributes and its `state_dict`;
the network reads the model's weights, so it computes what the model would with those layers.

Against the reference: the copy computes nothing of its own; what its layers change is said
by their modules.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from torch import nn

RuntimeLayer = Callable[[nn.Linear], nn.Module]
"""Makes the runtime layer that holds (and computes) one `nn.Linear` of a network."""


def network_of(model: nn.Module, layer: RuntimeLayer | None = None) -> nn.Module:
    """A copy of `model`'s modules sharing its parameters, buffers and config, in eval mode;
    each `nn.Linear` (the copy's own, on the model's parameters) held by a `layer(linear)`
    where `layer` is given. The model is not changed (its modules, attributes and mode)."""
    shared: dict[int, object] = {id(t): t for t in (*model.parameters(), *model.buffers())}
    config = vars(model).get("config")
    if config is not None:
        shared[id(config)] = config
    network = copy.deepcopy(model, shared)
    if layer is not None:
        for module in list(network.modules()):
            for name, child in list(module.named_children()):
                if isinstance(child, nn.Linear):
                    module.add_module(name, layer(child))
    return network.eval()
