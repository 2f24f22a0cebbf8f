"""rlhp's Hydra configs, shipped as package data: ``<group>/<option>.yaml`` mirrors the modules.

Importing this package (Hydra does, to read the configs) registers the resolver they use:
``${rlhp.either:a,b}`` is ``a`` unless it is null, else ``b`` (the run folder is ``resume`` when set), and
``${rlhp.sample:name}`` the path of a dataset shipped in ``rlhp/data/samples/`` (the one-minute offline path's).
"""

from importlib.resources import files

from omegaconf import OmegaConf

OmegaConf.register_new_resolver("rlhp.either", lambda first, second: second if first is None else first,
                                replace=True)
OmegaConf.register_new_resolver("rlhp.sample", lambda name: str(files("rlhp.data") / "samples" / name),
                                replace=True)
