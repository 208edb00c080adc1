"""A kernel file that ``bounds_host.py`` and ``frame_fuzz.py`` load from its text
(``binary_load_from_data``): one AI Core kernel that sets the first byte at ``ptr`` to 1."""

from npuemu.shared.kernel import kernel


@kernel("aicore")
def touch(ctx, ptr):
    ctx.tensor(ptr, "uint8", 1)[0] = 1
