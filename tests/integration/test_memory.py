"""pyACL memory, device and context scenarios against real device workers.

Each test runs its scenario in a fresh interpreter (``tests/progs/memory.py``, one function
per scenario), so the embedded node belongs to that child and is torn down when it exits (the
autouse leak check verifies it). The child records what it saw in a dict ``R`` that it prints
as JSON; the assertions are made here, so a failure shows every value at once.
"""

from __future__ import annotations

import json

import pytest
from childprog import run_program

pytestmark = pytest.mark.integration

MiB, GiB = 1 << 20, 1 << 30
ENV = {"NPUEMU_DEVICES": "4", "NPUEMU_HBM": "1G", "NPUEMU_DDR": "256M"}

# error codes (shared/errors.py)
INVALID_PARAM = 100000
REPEAT_INITIALIZE = 100002
REPEAT_FINALIZE = 100037
RT_PARAM_INVALID = 107000
INVALID_DEVICEID = 107001
CONTEXT_NULL = 107002
MEMORY_ALLOCATION = 207001
# ``count > dst_max`` (memcpy) and ``count > max_count`` (memset): 107000 since commit 191d197
# ("as in the rt layer"); earlier code said 100000.
COUNT_OVER_MAX = RT_PARAM_INVALID

PROG = "memory.py"


def scenario(run_prog, name: str, env: dict[str, str] | None = None,
             timeout: float = 60) -> dict:
    """Run the scenario ``name`` of the program in a child with ENV (+ ``env``); returns its
    ``R``."""
    return run_program(run_prog, PROG, name, env={**ENV, **(env or {})}, timeout=timeout)


# ------------------------------------------------------------------ copies and data integrity
def test_h2d_d2h_round_trip_bytes_and_numpy_on_every_device(run_prog):
    r = scenario(run_prog, "round_trips")
    assert r["count"] == [4, 0]
    for dev in range(4):
        assert r[str(dev)] == {"bytes_ok": True, "numpy_ok": True, "ptr_dev": dev, "q_dev": dev,
                               "attr_id": dev, "attr_type": 1, "current": dev}, dev
    assert r["still"] == {"0": True, "1": True, "2": True, "3": True}


def test_d2d_within_a_device(run_prog):
    r = scenario(run_prog, "d2d")
    assert r == {"d2d": 0, "b_ok": True, "inner": 0, "c_ok": True, "a_untouched": True}


def test_d2d_between_neighbouring_blocks_past_the_non_temporal_threshold(run_prog):
    r = scenario(run_prog, "aliased_d2d")
    assert r == {"apart": 64, "whole": 0, "whole_ok": True, "part": 0, "part_ok": True,
                 "async": 0, "async_ok": True}


def test_memcpy_default_infers_the_direction(run_prog):
    r = scenario(run_prog, "default_kind")
    assert r == {"h2d": 0, "d2d": 0, "d2h": 0, "h2h": 0, "data_ok": True}


def test_memset_device_and_host_memory(run_prog):
    r = scenario(run_prog, "memsets")
    assert r == {"dev": 0, "dev_ok": True, "dev_wrap": 0, "dev_wrap_ok": True, "host": 0,
                 "host_ok": True, "pinned": 0, "pinned_ok": True, "over_max": COUNT_OVER_MAX,
                 "past_alloc": RT_PARAM_INVALID, "unmapped": RT_PARAM_INVALID, "works": True}


def test_malloc_host_as_copy_source_and_destination(run_prog):
    r = scenario(run_prog, "malloc_host")
    assert r == {"rets": [0, 0], "aligned": True, "h2d": 0, "d2h": 0, "data_ok": True,
                 "h2h": 0, "h2h_ok": True, "attr": 0, "free_host": [0, 0],
                 "free_host_again": RT_PARAM_INVALID, "free_host_dev_ptr": RT_PARAM_INVALID}


# ----------------------------------------------------------------------- queries and policies
def test_get_mem_info_follows_malloc_and_free(run_prog):
    r = scenario(run_prog, "mem_info")
    assert r["ret"] == 0
    assert r["total"] == GiB
    assert r["free0"] == GiB  # nothing allocated yet on a fresh card
    assert r["after_malloc"] <= r["free0"] - 64 * MiB
    assert r["after_free"] == r["free0"]
    assert r["ddr_total"] == 256 * MiB
    assert r["unknown_attr"] == [0, 0, 0]
    assert r["no_ctx_thread"] == [0, 0, CONTEXT_NULL]


def test_pointer_get_attributes(run_prog):
    r = scenario(run_prog, "pointer_attributes")
    assert r["small"] == [{"type": 1, "id": 2, "page": 64 * 1024}, 0]
    assert r["inner"] == [{"type": 1, "id": 2, "page": 64 * 1024}, 0]
    assert r["huge"] == [{"type": 1, "id": 2, "page": 2 * MiB}, 0]
    assert r["pinned"][0]["type"] == 0 and r["pinned"][1] == 0
    assert r["pageable"][0]["type"] == 2 and r["pageable"][1] == 0
    assert r["freed"] == RT_PARAM_INVALID


def test_malloc_policies_page_classes(run_prog):
    r = scenario(run_prog, "policies")
    K64, M = 64 * 1024, MiB
    normal = {"page": K64, "arena": 0, "ret": 0, "data_ok": True}
    huge = {"page": 2 * M, "arena": 0, "ret": 0, "data_ok": True, "align2m": True}

    def check(name: str, expect: dict, used_min: int, used_max: int) -> None:
        got = r[name]
        assert {k: got[k] for k in expect} == expect, (name, got)
        assert used_min <= got["used"] <= used_max, (name, got)

    check("huge_first_small", normal, 4096, 4096 + 128)
    check("huge_first_1m", normal, M, M + 128)  # <= 1 MiB: normal pages
    check("huge_first_3m", huge, 4 * M, 4 * M)  # > 1 MiB: 2 MiB pages
    check("huge_only_small", huge, 2 * M, 2 * M)
    check("normal_only_3m", normal, 3 * M, 3 * M + 128)
    check("huge_first_p2p_small", normal, 4096, 4096 + 128)
    check("huge_first_p2p_3m", huge, 4 * M, 4 * M)
    check("huge_only_p2p", huge, 2 * M, 2 * M)
    check("normal_only_p2p", normal, 3 * M, 3 * M + 128)
    check("out_of_range_small", normal, 4096, 4096 + 128)
    check("out_of_range_4m", huge, 4 * M + 2 * M, 4 * M + 2 * M)  # 4 MiB + padding
    check("high_band_width", huge, 4 * M, 4 * M)  # HBM modifier: still HBM, HUGE_FIRST
    assert r["back_to_full"] == GiB


def test_huge1g_needs_a_free_gigabyte(run_prog):
    r = scenario(run_prog, "huge1g_pages")
    for key in ("6", "7"):
        assert r[key + "_free"] == 0, r
        assert r[key + "_page"] == GiB
        assert r[key + "_aligned"] is True
        assert r[key + "_hbm_left"] == 0
        assert r[key + "_tail_ok"] is True
        assert r[key + "_partly_used"] == [0, MEMORY_ALLOCATION]
    assert r["works"] is True


def test_low_band_width_modifier_allocates_from_ddr(run_prog):
    r = scenario(run_prog, "low_band_width")
    assert r["arena"] == 1
    assert r["ddr_used"] >= 5 * MiB
    assert r["hbm_used"] == 0
    assert r["data_ok"] is True
    assert r["ddr_status"] == r["ddr_used"]
    assert r["ddr_back"] is True
    assert r["normal_ddr"][0] == 1 and 4096 <= r["normal_ddr"][1] <= 4096 + 128
    assert r["ddr_oom"] == [0, MEMORY_ALLOCATION]


def test_out_of_memory_and_worker_keeps_serving(run_prog):
    r = scenario(run_prog, "out_of_memory")
    assert r["too_big"] == [0, MEMORY_ALLOCATION]
    assert r["exact_plus_one"] == [0, MEMORY_ALLOCATION]
    assert r["rest_too_small"] == [0, MEMORY_ALLOCATION]
    assert r["works"] is True
    assert r["full_again"] is True
    assert r["same_worker"] is True


# ------------------------------------------------------------------------------- bad inputs
def test_bad_malloc_and_free(run_prog):
    r = scenario(run_prog, "bad_malloc_free")
    assert r == {
        "malloc_0": [0, INVALID_PARAM], "malloc_neg": [0, INVALID_PARAM],
        "free_unknown": RT_PARAM_INVALID, "free_interior": RT_PARAM_INVALID,
        "free_host_addr": RT_PARAM_INVALID, "free_other_device_ptr": RT_PARAM_INVALID,
        "free_0": RT_PARAM_INVALID, "free": 0, "double_free": RT_PARAM_INVALID,
        "use_after_free": RT_PARAM_INVALID, "works": True, "hbm_full": True,
    }


def test_bad_memcpy_arguments(run_prog):
    r = scenario(run_prog, "bad_memcpy")
    P = RT_PARAM_INVALID
    assert r == {
        "count_gt_max": COUNT_OVER_MAX, "count_gt_max_d2h": COUNT_OVER_MAX,
        # the synchronous memcpy takes its direction from the addresses, as the real
        # driver does: a kind that does not match them is not an error
        "h2d_kind_dev_src": 0, "d2h_kind_host_src": 0, "d2d_kind_host_dst": 0,
        "h2h_kind_dev": 0, "bad_kind": P, "null_dst": INVALID_PARAM,
        "h2d_past_end": P, "h2d_offset_past_end": P, "d2h_past_end": P, "d2d_past_end": P,
        "d2d_beyond_arena": P, "h2d_unknown_dev": P, "h2d_other_card": P,
        "h2d_unmapped_src": P, "d2h_unmapped_dst": P, "h2h_unmapped": P,
        "default_unmapped": P, "d2h_into_readonly": P, "memset_readonly": P,
        "h2d_from_readonly": 0, "count_0": 0, "works": True, "same_worker": True,
    }


def test_copy_into_freed_pinned_memory_is_an_error_not_a_crash(run_prog):
    res = run_prog(PROG, "freed_pinned", env=ENV, timeout=60)
    assert res.returncode == 0, f"child died ({res.returncode}):\n{res.stderr[-2000:]}"
    r = json.loads(res.stdout.split("RESULT ", 1)[1])
    assert r == {"d2h_into_freed": RT_PARAM_INVALID, "h2d_from_freed": RT_PARAM_INVALID,
                 "memset_freed": RT_PARAM_INVALID, "works": True}


def test_pointer_freed_in_another_thread(run_prog):
    r = scenario(run_prog, "freed_in_thread")
    assert r == {"thread_set": 0, "thread_free": 0, "thread_free_again": RT_PARAM_INVALID,
                 "main_h2d": RT_PARAM_INVALID, "main_d2h": RT_PARAM_INVALID,
                 "main_free": RT_PARAM_INVALID, "works": True, "hbm_full": True}


# --------------------------------------------------------------------- devices and contexts
def test_current_device_is_per_thread(run_prog):
    r = scenario(run_prog, "per_thread_device")
    assert r["thread"] == {
        "get_device": [-1, CONTEXT_NULL], "malloc": [0, CONTEXT_NULL],
        "get_mem_info": [0, 0, CONTEXT_NULL], "set": 0, "after_set": [1, 0],
        "malloc_card": [1, 0], "share_ctx": 0, "shared_dev": [0, 0],
    }
    assert r["main_after"] == [0, 0]
    assert r["fresh"] == [-1, CONTEXT_NULL]


def test_set_device_reference_counting_and_reset(run_prog):
    r = scenario(run_prog, "reset_counting")
    assert r["used"] >= 32 * MiB
    assert r["reset1"] == 0
    assert r["after_reset1"] == [[2, 0], 0]
    assert r["reset2"] == 0
    assert r["after_reset2"] == [[-1, CONTEXT_NULL], CONTEXT_NULL]
    assert r["reset3"] == RT_PARAM_INVALID
    assert r["stale_ptr"] == [RT_PARAM_INVALID, RT_PARAM_INVALID]
    assert r["reclaimed"] == 0
    assert r["fresh_free"] is True
    assert r["works"] is True


def test_reset_device_force_ignores_the_count(run_prog):
    r = scenario(run_prog, "reset_force")
    assert r == {"force": 0, "get_device": [-1, CONTEXT_NULL], "memcpy": RT_PARAM_INVALID,
                 "ctx_gone": RT_PARAM_INVALID, "again": RT_PARAM_INVALID,
                 "fresh_free": True, "works": True}


def test_ascend_rt_visible_devices_reindexes_cards(run_prog):
    r = scenario(run_prog, "visible_devices", env={"ASCEND_RT_VISIBLE_DEVICES": "1,3"})
    assert r["count"] == [2, 0]
    assert r["card_of_p"] == 1
    assert r["attr_id"] == 0
    assert r["logical"] == [0, 0]
    assert r["node1_used"] >= 8 * MiB
    assert r["node0_state"] == "ABSENT"  # node card 0 was never touched
    assert r["card_of_q"] == 3
    assert r["node3_used"] >= 4096
    assert r["set_2"] == INVALID_DEVICEID


def test_init_finalize_run_mode_soc_name(run_prog):
    r = scenario(run_prog, "init_finalize")
    assert r == {"init": 0, "init2": REPEAT_INITIALIZE, "run_mode": [1, 0],
                 "soc": "Ascend910B1", "rt_soc": "Ascend910B1", "version": [1, 17, 0, 0],
                 "count": [4, 0], "soc_after_set": "Ascend910B1", "fin": 0,
                 "fin2": REPEAT_FINALIZE, "reinit": 0, "fin3": 0}
