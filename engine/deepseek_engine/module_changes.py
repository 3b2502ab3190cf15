"""A counter of structural module changes, so caches that hold parameter objects know when to look again.

The batched decode path keeps, per layer, the parameter objects it reads (hyper-connection sites, attention
and MoE plans, the stacked and blocked weight copies) so that a step resolves no module attributes. Weights
changed in place stay visible through those objects; a parameter, buffer or submodule *replaced* by a new
object is not. PyTorch calls a global hook whenever any module registers a parameter, buffer or submodule
(``setattr``, ``register_parameter``, ``load_state_dict(assign=True)``, building a module); each call
bumps :func:`generation`. A cache records the generation it was built at and rebuilds when it differs: one
integer comparison per step instead of walking the module tree.

The count is process-wide (a new module built anywhere also bumps it), which only costs a rebuild.
"""

from __future__ import annotations

from torch.nn.modules import module as _module

_generation = 0


def _bump(*_args) -> None:
    global _generation
    _generation += 1


_module.register_module_parameter_registration_hook(_bump)
_module.register_module_buffer_registration_hook(_bump)
_module.register_module_module_registration_hook(_bump)


def generation() -> int:
    """The number of parameter / buffer / submodule registrations seen so far in this process."""
    return _generation
