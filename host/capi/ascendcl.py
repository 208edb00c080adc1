"""The modules whose ``@export`` bodies make up ``libascendcl.so`` (imported by ``boot``)."""

from npuemu.host.capi import base, callbacks, kernels, mdl, mem, ops, prof, rt

__all__ = ["base", "callbacks", "kernels", "mdl", "mem", "ops", "prof", "rt"]
