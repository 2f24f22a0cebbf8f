"""rlhp's Hydra configs, shipped as package data: ``<group>/<option>.yaml`` mirrors the modules.

Importing this package (Hydra does, to read the configs) registers the resolver they use:
``${rlhp.either:a,b}`` is ``a`` unless it is null, else ``b`` (the run folder is ``resume`` when set).
"""

from omegaconf import OmegaConf

OmegaConf.register_new_resolver("rlhp.either", lambda first, second: second if first is None else first,
                                replace=True)
