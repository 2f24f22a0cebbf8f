"""rlhp's Hydra configs, shipped as package data: ``<group>/<option>.yaml`` mirrors the modules."""
