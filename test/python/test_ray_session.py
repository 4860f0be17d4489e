"""Starting a local Ray instance: a node that timed out at start-up is started once more.

Ray 2.60 raises a bare ``Exception`` when a new node's raylet has not registered within
30 s (seen once in a loaded CI run); ``ray_session`` shuts the failed start down (its
head's processes would stay behind) and starts again, and a second time-out is a
:class:`RayUnavailableError` naming the fix. The first start's failure is injected; the
second start is a real local instance.
"""

from __future__ import annotations

import pytest

from mlbridge.training.ray_pool import RayUnavailableError, ray_session

ray = pytest.importorskip("ray")

TIMEOUT = (
    "The current node timed out during startup. This could happen because some of the "
    "raylet failed to startup or the GCS has become overloaded."
)


def _failing_init(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """``ray.init`` times out ``failures`` times, then starts Ray; returns the call count."""
    real = ray.init
    calls = [0]

    def init(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] <= failures:
            raise Exception(TIMEOUT)  # what Ray raises
        return real(*args, **kwargs)

    monkeypatch.setattr(ray, "init", init)
    return calls


def test_a_local_node_that_timed_out_at_startup_is_started_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _failing_init(monkeypatch, failures=1)
    with ray_session(num_cpus=1) as where:
        assert where.startswith("local Ray instance (1 node")
        assert ray.get(ray.remote(lambda: 6 * 7).remote()) == 42
    assert calls[0] == 2 and not ray.is_initialized()


def test_a_local_node_that_timed_out_twice_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _failing_init(monkeypatch, failures=2)
    with pytest.raises(RayUnavailableError, match="timed out during startup.*--no-ray"):
        with ray_session(num_cpus=1):
            pass
    assert calls[0] == 2 and not ray.is_initialized()
