"""A kernel file that ``frame_bystander.py`` loads from its text (``binary_load_from_data``):
one AI Vector kernel whose blocks each fill their share of ``n`` bytes at ``ptr`` with
``value``."""

from npuemu.shared.kernel import kernel


@kernel("aivector")
def fill(ctx, ptr, n, value):
    lo, hi = ctx.split(n)
    ctx.tensor(ptr, "uint8", n)[lo:hi] = value
