"""Fault injection on one device: the faults a real card can have, with the effects and the
ACL codes a real card would give.

| kind        | parameters              | effect                                              |
|-------------|-------------------------|-----------------------------------------------------|
| ecc_single  | ptr                     | corrected; counted; health WARNING at the threshold |
| ecc_multi   | ptr                     | the 4 KiB page is isolated: any copy, memset or     |
|             |                         | kernel touching it fails with 507054; health ALARM  |
| aicore, aivector, aicpu | kernel (name or ""), nth | the nth matching launch fails with the engine's code |
| hang        | count                   | the next task(s) never complete (sync timeouts catch them; stream abort or device reset clear them) |
| dma         | code (507013 or 507053) | the next copy or memset task fails with it          |
| link        | peer, clear             | copies between this card and ``peer`` fail with 507056 |
| lost        |                         | the worker dies (device loss)                       |
| clear_ecc   |                         | ECC counters back to 0 and health recomputed (npu-smi clear); isolated pages stay |

Every fault is logged as an EVENT line with its time. ``NPUEMU_ECC_SBE_WARN`` sets the
single-bit count that turns health to WARNING (default 5).

Threading model: injection and every check run in the worker's loop thread, except
``check_ranges``, which kernels also call from engine threads for pointers of this card
(already resolved, so it only reads the control block's poison table; it never maps a
peer from an engine thread).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from npuemu.device.contracts import Card
from npuemu.shared import address, errors, layout
from npuemu.shared.config import WorkerSettings
from npuemu.shared.layout import DEVICE_CTL, POISON_ENTRY, Health

PAGE = 4096
HBM_ECC_EVENT_ID = 0x80E01801
_C = DEVICE_CTL
_ENGINE_CODES = {"aicore": errors.ACL_ERROR_RT_AICORE_EXCEPTION,
                 "aivector": errors.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
                 "aicpu": errors.ACL_ERROR_RT_AICPU_EXCEPTION}


class Faults:
    """Injected faults of one device and the checks the worker makes against them."""

    def __init__(self, worker: Card) -> None:
        self.worker = worker
        self.ctl = worker.ctl
        self.sbe_warn = WorkerSettings.from_env().ecc_sbe_warn
        self.engine_faults: list[list[Any]] = []  # [engine, kernel name or "", countdown]
        self.hangs = 0
        self.dma_code = 0

    # injection -----------------------------------------------------------------------------
    def inject(self, kind: str, params: dict[str, Any]) -> None:
        handler = getattr(self, f"_inject_{kind}", None)
        if handler is None:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"unknown fault {kind!r}")
        handler(**params)
        self.ctl[_C.FAULTS] += 1
        self.worker.log("EVENT", f"fault injected: {kind} {log_params(params)}".rstrip(),
                        module="DRV")

    def _inject_ecc_single(self, ptr: int) -> None:
        self._own(ptr)
        self.ctl[_C.ECC_SBE] += 1
        self.ctl[_C.ECC_SBE_TOTAL] += 1
        self.worker.log("WARNING", f"HBM SINGLE BIT ECC, corrected, device_id={self.worker.dev}, "
                                   f"addr=0x{ptr:x}", module="DRV")
        self._update_health()

    def _inject_ecc_multi(self, ptr: int) -> None:
        self._own(ptr)
        ctl, used = self.ctl, self.ctl[_C.POISONED]
        page = ptr - ptr % PAGE
        if layout.poisoned_overlap(ctl, page, PAGE):  # already isolated: count it only
            ctl[_C.ECC_DBE] += 1
            ctl[_C.ECC_DBE_TOTAL] += 1
            self._update_health()
            return
        if used >= layout.MAX_POISON:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "poison table full")
        base = layout.CTL_POISON + used * POISON_ENTRY.words
        ctl[base + POISON_ENTRY.START] = page
        ctl[base + POISON_ENTRY.LENGTH] = PAGE
        ctl[_C.POISONED] = used + 1
        ctl[_C.ECC_DBE] += 1
        ctl[_C.ECC_DBE_TOTAL] += 1
        ctl[_C.LAST_ERROR] = errors.ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR
        self.worker.log("ERROR", f"HBM MULTI BIT ECC, Uncorrectable ECC, device_id="
                                 f"{self.worker.dev}, event_id=0x{HBM_ECC_EVENT_ID:x}, time us="
                                 f"{time.time_ns() // 1000}", module="DRV")
        self._update_health()

    def _inject_engine(self, engine: str, kernel: str = "", nth: int = 1) -> None:
        if nth < 1:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, "nth must be >= 1")
        self.engine_faults.append([engine, kernel, nth])

    def _inject_aicore(self, kernel: str = "", nth: int = 1) -> None:
        self._inject_engine("aicore", kernel, nth)

    def _inject_aivector(self, kernel: str = "", nth: int = 1) -> None:
        self._inject_engine("aivector", kernel, nth)

    def _inject_aicpu(self, kernel: str = "", nth: int = 1) -> None:
        self._inject_engine("aicpu", kernel, nth)

    def _inject_hang(self, count: int = 1) -> None:
        self.hangs += count

    def _inject_dma(self, code: int = errors.ACL_ERROR_RT_SYS_DMA) -> None:
        if code not in (errors.ACL_ERROR_RT_SYS_DMA, errors.ACL_ERROR_RT_DEVICE_MEM_ERROR):
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"dma code {code}")
        self.dma_code = code

    def _inject_link(self, peer: int, clear: bool = False) -> None:
        if not 0 <= peer < 64 or peer == self.worker.dev:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID, f"peer {peer}")
        if clear:
            self.ctl[_C.LINK_FAULTS] &= ~(1 << peer)
        else:
            self.ctl[_C.LINK_FAULTS] |= 1 << peer

    def _inject_lost(self) -> None:
        self.worker.log("EVENT", f"device {self.worker.dev} lost (injected)", module="DRV")
        os.kill(os.getpid(), signal.SIGKILL)

    def _inject_clear_ecc(self) -> None:
        self.ctl[_C.ECC_SBE] = self.ctl[_C.ECC_DBE] = 0
        self._update_health()

    def _own(self, ptr: int) -> None:
        if not address.is_device_ptr(ptr) or address.decode(ptr)[0] != self.worker.dev:
            raise errors.error_for(errors.ACL_ERROR_RT_PARAM_INVALID,
                                   f"0x{ptr:x} is not an address of device {self.worker.dev}")

    def _update_health(self) -> None:
        ctl = self.ctl
        if ctl[_C.ECC_DBE]:
            ctl[_C.HEALTH] = Health.ALARM
        elif ctl[_C.ECC_SBE] >= self.sbe_warn:
            ctl[_C.HEALTH] = Health.WARNING
        else:
            ctl[_C.HEALTH] = Health.OK

    # checks made while running tasks -------------------------------------------------------
    def check_ranges(self, *ranges: tuple[int, int]) -> None:
        """507054 if any ``(device ptr, count)`` touches an isolated page (of this card or,
        for P2P, of the peer card)."""
        for ptr, count in ranges:
            if not address.is_device_ptr(ptr):
                continue
            dev = address.decode(ptr)[0]
            ctl = self.ctl if dev == self.worker.dev else self.worker.peer(dev).ctl
            if ctl[_C.POISONED] and layout.poisoned_overlap(ctl, ptr, count):
                raise errors.error_for(errors.ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR,
                                       f"0x{ptr:x}+{count} touches an isolated HBM page")

    def check_copy(self, peers: tuple[int, ...]) -> None:
        """A pending DMA fault or a faulty link fails this copy."""
        if self.dma_code:
            code, self.dma_code = self.dma_code, 0
            raise errors.error_for(code, "DMA engine error (injected)")
        for peer in peers:  # a link is faulty if either end says so
            if (self.ctl[_C.LINK_FAULTS] >> peer & 1
                    or self.worker.peer(peer).ctl[_C.LINK_FAULTS] >> self.worker.dev & 1):
                raise errors.error_for(errors.ACL_ERROR_RT_LINK_ERROR,
                                       f"link {self.worker.dev} <-> {peer} failed (injected)")

    def check_launch(self, engine: str, kernel: str) -> None:
        for fault in self.engine_faults:
            if fault[0] == engine and fault[1] in ("", kernel):
                fault[2] -= 1
                if fault[2] == 0:
                    self.engine_faults.remove(fault)
                    raise errors.error_for(_ENGINE_CODES[engine],
                                           f"{engine} exception in kernel {kernel} (injected)")
                return

    def take_hang(self) -> bool:
        if self.hangs:
            self.hangs -= 1
            return True
        return False


def log_params(params: dict[str, Any]) -> str:
    """A fault's parameters for a log line, as CANN's lines give them: ``key=value`` pairs,
    addresses (``ptr``, ``addr``) in hex, never a Python dict."""
    return ", ".join(f"{k}=0x{v:x}" if k in ("ptr", "addr") and isinstance(v, int) else f"{k}={v}"
                     for k, v in params.items())
