"""The launch tests' leak check finds what a launch leaves behind (tests/launching.py)."""

from __future__ import annotations

from launching import SHM, Launches, env


def test_a_process_that_escaped_into_its_own_session_is_found_and_ended():
    made = Launches()
    # like torchrun's workers: a new session, outliving the command that started it
    rc, _, _, _ = made.run(["sh", "-c", "setsid sleep 60 >/dev/null 2>&1 &"], env(), 30)
    assert rc == 0
    alive, _ = made.leftovers(grace=0)
    assert len(alive) == 1
    made.clean()
    assert made.alive() == []


def test_a_new_shm_entry_is_found_and_removed(tmp_path):
    made = Launches()
    name = f"msccl_py-leak-test-{made.token}"
    rc, _, _, _ = made.run(["sh", "-c", f"echo x > {SHM / name}"], env(), 30)
    assert rc == 0
    _, shm = made.leftovers(grace=0)
    assert shm == [name]
    made.clean()
    assert not (SHM / name).exists()
