"""The modules whose ``@export`` bodies make up ``libascendcl.so`` (imported by ``boot``)."""

from npuemu.host.capi import base, mem, rt

__all__ = ["base", "mem", "rt"]
