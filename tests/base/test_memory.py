"""What a step may still allocate: the cgroup limits read as the kernel counts them."""
from __future__ import annotations

from ddflow.base import memory

V2 = ("memory.max", "memory.current", "memory.stat", "inactive_file")
V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat", "total_inactive_file")


def _group(tmp_path, names, limit, used, stat):
    (tmp_path / names[0]).write_text(f"{limit}\n")
    (tmp_path / names[1]).write_text(f"{used}\n")
    (tmp_path / names[2]).write_text("".join(f"{k} {v}\n" for k, v in stat.items()))
    return str(tmp_path), *names


def test_room_is_the_limit_less_use_not_counting_reclaimable_file_cache(tmp_path):
    stat = {"anon": 500, "inactive_file": 300, "total_inactive_file": 300, "active_file": 200}
    assert memory.room_under(*_group(tmp_path, V2, 2000, 1500, stat)) == 2000 - 1500 + 300
    assert memory.room_under(*_group(tmp_path, V1, 2000, 1500, stat)) == 800
    assert memory.room_under(*_group(tmp_path, V2, 1000, 1500, {})) == 0  # over the limit: no room, not negative


def test_no_limit_and_unreadable_groups_leave_the_machine_s_memory(tmp_path):
    assert memory.room_under(*_group(tmp_path, V2, "max", 10, {})) is None
    assert memory.room_under(*_group(tmp_path, V1, 9223372036854771712, 10, {})) is None  # v1's "unlimited"
    assert memory.room_under(str(tmp_path / "absent"), *V2) is None
    free = memory.available_bytes()
    assert free is None or free > 0
